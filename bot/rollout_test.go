package bot

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"changebot/demo"
	"changebot/internal/fixture"
	"changebot/store/postgres/pgtest"
)

// hookResult is one webhook the rollout test sent and what it got back.
type hookResult struct {
	key    string
	sentAt time.Time
	status int // 0: no answer (connection refused after the drain)
}

// TestRolloutStoresEveryHookSentDuringTheShutdownDelay runs `changebot
// serve` in a subprocess, sends GitLab webhooks to it every 10 ms, and
// sends it SIGTERM in the middle (issue 14 point 7). /readyz must answer
// 503 at once while the webhooks sent during the shutdown delay are still
// answered 200 and every one of them is stored; the process exits 0 after
// the delay.
func TestRolloutStoresEveryHookSentDuringTheShutdownDelay(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Second
	sc := pgtest.New(t)
	env := newTestEnv(t, true, time.Second)
	addr := env.Listener.Addr().String() // the subprocess serves there (botProcess.ln)
	cfgFile := filepath.Join(t.TempDir(), "changebot.yaml")
	if err := os.WriteFile(cfgFile, []byte("log_level: info\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	p := &botProcess{t: t, logs: logs, env: []string{cfgFile,
		"CHANGEBOT_LISTEN=" + addr,
		"DATABASE_URL=" + sc.URL,
		"CHANGEBOT_GITLAB_URL=" + env.GitLab.URL(),
		"CHANGEBOT_GITLAB_TOKEN=" + demo.RobotToken,
		"CHANGEBOT_REVIEWER_TOKENS=" + demo.Reviewers[0].Token,
		"CHANGEBOT_WEBHOOK_SECRETS=" + demo.WebhookSecret,
		"CHANGEBOT_CALLBACK_SECRET=" + demo.CallbackSecret,
		"CHANGEBOT_API_TOKENS=submitter:" + demo.APIToken,
		"CHANGEBOT_APPROVAL_URL=" + env.Approvals.URL(),
		"CHANGEBOT_EXTERNAL_URL=" + env.BaseURL,
		"CHANGEBOT_SHUTDOWN_DELAY=" + delay.String(),
		"CHANGEBOT_SHUTDOWN_GRACE=5s",
	}, ln: env.Listener}
	p.start()
	defer p.kill()
	defer func() {
		if t.Failed() {
			t.Logf("bot output:\n%s", logs.String())
		}
	}()
	base := "http://" + addr
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, base+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(30 * time.Second)
	for get("/readyz") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the bot never became ready")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A comment as GitLab sends it; each send is its own delivery
	// (Idempotency-Key), as a /retry posted during the rollout would be. It
	// mentions a person ("@alice please"), so the intake stores it (it may
	// be a command for a bot of that name: commands.MayHoldCommand), while
	// the executor finds no command for the robot and calls nothing.
	note := fixture.GitLab(t, "webhook-note-mr.json")
	body := bytes.Replace(note, []byte(`"This MR needs work."`), []byte(`"@alice please look"`), 1)
	if bytes.Equal(body, note) {
		t.Fatal("fixture note not found")
	}
	var (
		mu      sync.Mutex
		results []hookResult
	)
	stop := make(chan struct{})
	senderDone := make(chan struct{})
	go func() {
		defer close(senderDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			key := fmt.Sprintf("rollout-%04d", i)
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/webhooks/gitlab", bytes.NewReader(body))
			req.Header.Set("X-Gitlab-Event", "Note Hook")
			req.Header.Set("X-Gitlab-Token", demo.WebhookSecret)
			req.Header.Set("Idempotency-Key", key)
			r := hookResult{key: key, sentAt: time.Now()}
			if resp, err := client.Do(req); err == nil {
				r.status = resp.StatusCode
				_ = resp.Body.Close()
			}
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		}
	}()
	// SIGTERM comes in the middle of the stream: once the bot has answered
	// the sender's first webhooks.
	waitFor(t, 30*time.Second, "the bot to answer the sender's first 10 webhooks", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range results {
			if r.status == http.StatusOK {
				n++
			}
		}
		return n >= 10
	})
	sigAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Not ready first: /readyz answers 503 well before the delay is over.
	var notReadyAt time.Time
	for time.Since(sigAt) < delay/2 {
		if get("/readyz") == http.StatusServiceUnavailable {
			notReadyAt = time.Now()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if notReadyAt.IsZero() {
		t.Fatalf("/readyz did not answer 503 within %s of SIGTERM", delay/2)
	}
	exited := p.exited()
	var exitErr error
	select {
	case exitErr = <-exited:
	case <-time.After(delay + 15*time.Second):
		t.Fatal("the bot did not exit after SIGTERM")
	}
	exitAt := time.Now()
	// The sender goes on past the exit: its stream covers the whole delay
	// once a webhook sent after the exit went unanswered.
	waitFor(t, 10*time.Second, "a webhook sent after the exit", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range results {
			if r.sentAt.After(exitAt) {
				return true
			}
		}
		return false
	})
	close(stop)
	<-senderDone
	if exitErr != nil {
		t.Fatalf("the bot exited with %v after SIGTERM, want 0", exitErr)
	}
	if exitAt.Sub(sigAt) < delay {
		t.Fatalf("the bot exited %s after SIGTERM, before the %s shutdown delay", exitAt.Sub(sigAt), delay)
	}

	// Every hook sent before the delay ended was answered 200, also those
	// sent after /readyz said 503.
	mu.Lock()
	defer mu.Unlock()
	var accepted []string
	duringDelay, afterNotReady := 0, 0
	for _, r := range results {
		if r.sentAt.Before(sigAt.Add(delay)) && r.status != http.StatusOK {
			t.Errorf("hook %s sent %s after SIGTERM (within the %s delay) got status %d", r.key, r.sentAt.Sub(sigAt), delay, r.status)
		}
		if r.status == http.StatusOK {
			accepted = append(accepted, r.key)
			if r.sentAt.After(sigAt) {
				duringDelay++
			}
			if r.sentAt.After(notReadyAt) {
				afterNotReady++
			}
		}
	}
	if duringDelay < 20 || afterNotReady < 20 {
		t.Fatalf("only %d hooks answered 200 after SIGTERM (%d after /readyz said 503): the test did not send through the delay", duringDelay, afterNotReady)
	}
	// And every one answered 200 is stored.
	var stored int
	err := sc.Pool.QueryRow(context.Background(), "SELECT count(*) FROM webhook_deliveries WHERE dedupe_key = ANY($1)",
		prefixed("idem:", accepted)).Scan(&stored)
	if err != nil {
		t.Fatal(err)
	}
	if stored != len(accepted) {
		t.Fatalf("%d of the %d hooks answered 200 are stored", stored, len(accepted))
	}
	t.Logf("%d hooks sent, %d answered 200 and stored, %d of them after SIGTERM; exit %s after SIGTERM",
		len(results), len(accepted), duringDelay, exitAt.Sub(sigAt).Round(time.Millisecond))
	if !strings.Contains(logs.String(), "still accepting requests for the shutdown delay") {
		t.Error("serve did not log that it turned not ready for the shutdown delay")
	}
}

func prefixed(prefix string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = prefix + s
	}
	return out
}

// TestSecondSignalStopsAtOnce: a second SIGTERM during the shutdown delay
// ends serve at once (the default action is back after the first), so a
// person's second Ctrl-C is never made to wait out the delay.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	t.Parallel()
	const delay = 30 * time.Second
	sc := pgtest.New(t)
	env := newTestEnv(t, true, time.Second)
	addr := env.Listener.Addr().String() // the subprocess serves there (botProcess.ln)
	cfgFile := filepath.Join(t.TempDir(), "changebot.yaml")
	if err := os.WriteFile(cfgFile, []byte("log_level: info\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	p := &botProcess{t: t, logs: logs, env: []string{cfgFile,
		"CHANGEBOT_LISTEN=" + addr, "DATABASE_URL=" + sc.URL, "CHANGEBOT_GITLAB_URL=" + env.GitLab.URL(),
		"CHANGEBOT_GITLAB_TOKEN=" + demo.RobotToken, "CHANGEBOT_REVIEWER_TOKENS=" + demo.Reviewers[0].Token,
		"CHANGEBOT_WEBHOOK_SECRETS=" + demo.WebhookSecret, "CHANGEBOT_CALLBACK_SECRET=" + demo.CallbackSecret,
		"CHANGEBOT_API_TOKENS=submitter:" + demo.APIToken, "CHANGEBOT_APPROVAL_URL=" + env.Approvals.URL(),
		"CHANGEBOT_EXTERNAL_URL=" + env.BaseURL, "CHANGEBOT_SHUTDOWN_DELAY=" + delay.String(),
	}, ln: env.Listener}
	p.start()
	defer p.kill()
	waitListening(t, addr)
	exited := p.exited()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "still accepting requests for the shutdown delay") {
		if time.Now().After(deadline) {
			t.Fatalf("serve never entered the shutdown delay:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	second := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		t.Logf("exited %s after the second SIGTERM", time.Since(second).Round(time.Millisecond))
	case <-time.After(delay / 3):
		t.Fatalf("serve still runs %s after a second SIGTERM", delay/3)
	}
}
