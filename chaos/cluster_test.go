package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// replica is one `changebot serve` subprocess: the test binary re-executed
// with CHANGEBOT_TEST_SUBPROCESS=1 (see TestMain), listening on addr.
type replica struct {
	idx     int
	addr    string
	cfgFile string
	env     []string
	logPath string

	mu    sync.Mutex
	cmd   *exec.Cmd
	alive atomic.Bool
	kills int
}

func (r *replica) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	logs, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("opening replica log: %w", err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Args = []string{os.Args[0], "serve", "-config=" + r.cfgFile}
	cmd.Env = append(append(os.Environ(), r.env...), "CHANGEBOT_LISTEN="+r.addr, "CHANGEBOT_TEST_SUBPROCESS=1")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		_ = logs.Close()
		return fmt.Errorf("starting replica %d: %w", r.idx, err)
	}
	_ = logs.Close() // the child holds its own descriptor
	r.cmd = cmd
	if !waitListening(r.addr, 30*time.Second) {
		return fmt.Errorf("replica %d did not listen on %s; log %s", r.idx, r.addr, r.logPath)
	}
	r.alive.Store(true)
	return nil
}

// kill sends SIGKILL and reaps the process.
func (r *replica) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	r.alive.Store(false)
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = r.cmd.Process.Wait()
	r.cmd = nil
	r.kills++
}

func waitListening(addr string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// proxy is a round-robin reverse proxy in front of the replicas: what a
// load balancer with health checks does. It skips dead replicas and, since
// every request that reaches it is idempotent (webhooks by Idempotency-Key,
// callbacks by request id, submissions by Idempotency-Key), retries a
// request on the next replica when one dies under it.
type proxy struct {
	replicas []*replica
	next     atomic.Uint64
	client   *http.Client
	failed   atomic.Int64 // requests no replica answered
	retried  atomic.Int64
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, "reading body", http.StatusBadRequest)
		return
	}
	deadline := time.Now().Add(20 * time.Second)
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		rep := p.replicas[p.next.Add(1)%uint64(len(p.replicas))]
		if !rep.alive.Load() {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, "http://"+rep.addr+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := p.client.Do(req)
		if err != nil {
			p.retried.Add(1)
			continue
		}
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		_ = resp.Body.Close()
		return
	}
	p.failed.Add(1)
	http.Error(w, "no replica answered", http.StatusBadGateway)
}

// scrapeValidated returns the sum of changebot_validated_total on a
// replica's /metrics, by source.
func scrapeValidated(ctx context.Context, addr string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "changebot_validated_total{") {
			continue
		}
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, "changebot_validated_total{"), "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		src := strings.TrimSuffix(strings.TrimPrefix(labels, `source="`), `"`)
		out[src] += v
	}
	return out, nil
}

// killer kills a random live replica every period (after scraping its
// metrics) and restarts it after down, until stop is closed.
type killer struct {
	replicas []*replica
	period   time.Duration
	down     time.Duration
	rng      *rand.Rand

	mu      sync.Mutex
	scraped map[string]float64 // validated_total of killed processes
	kills   int
	missed  int // scrapes that failed before a kill
	errs    []error
}

func (k *killer) run(ctx context.Context, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		jitter := time.Duration(k.rng.Int64N(int64(k.period)/2 + 1))
		select {
		case <-stop:
			return
		case <-time.After(k.period/2 + jitter):
		}
		rep := k.replicas[k.rng.IntN(len(k.replicas))]
		m, err := scrapeValidated(ctx, rep.addr)
		rep.kill()
		k.mu.Lock()
		k.kills++
		if err != nil {
			k.missed++
		}
		for s, v := range m {
			k.scraped[s] += v
		}
		k.mu.Unlock()
		select {
		case <-stop:
		case <-time.After(k.down):
		}
		if err := rep.start(); err != nil {
			k.mu.Lock()
			k.errs = append(k.errs, err)
			k.mu.Unlock()
		}
	}
}

func sumValues(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

func fmtMap[V any](m map[string]V) string {
	var b strings.Builder
	b.WriteString("{")
	first := true
	for _, k := range sortedKeys(m) {
		if !first {
			b.WriteString(", ")
		}
		first = false
		fmt.Fprintf(&b, "%s: %v", k, m[k])
	}
	b.WriteString("}")
	return b.String()
}
