package gitlabfake

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// delivery is one webhook POST the test receiver got.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver is a webhook endpoint that records every delivery.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []delivery
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, delivery{header: req.Header.Clone(), body: b})
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// find returns the bodies of deliveries of event whose action (MR, note) or
// status (pipeline) is action.
func (r *receiver) find(event, action string) []map[string]any {
	var out []map[string]any
	for _, d := range r.deliveries() {
		if d.header.Get("X-Gitlab-Event") != event {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(d.body, &m); err != nil {
			continue
		}
		oa, _ := m["object_attributes"].(map[string]any)
		if oa["action"] == action || oa["status"] == action {
			out = append(out, m)
		}
	}
	return out
}

const (
	secret        = "hook-secret"
	robotToken    = "robot-token"
	reviewerToken = "reviewer-token"
	reporterToken = "reporter-token"
)

// env is the shared fixture of most tests: a server with a receiver, a
// project "group/repo", a Maintainer robot, a Developer reviewer and a
// Reporter.
type env struct {
	t    *testing.T
	srv  *Server
	recv *receiver
	proj Project
}

func setup(t *testing.T, spec ProjectSpec) *env {
	t.Helper()
	recv := newReceiver(t)
	srv := New(Options{WebhookURL: recv.srv.URL, WebhookSecret: secret})
	t.Cleanup(srv.Close)
	srv.AddUser("robot", robotToken, AsBot())
	srv.AddUser("reviewer", reviewerToken)
	srv.AddUser("reporter", reporterToken)
	if spec.PathWithNamespace == "" {
		spec.PathWithNamespace = "group/repo"
	}
	if spec.Members == nil {
		spec.Members = map[string]int{"robot": AccessMaintainer, "reviewer": AccessDeveloper, "reporter": AccessReporter}
	}
	return &env{t: t, srv: srv, recv: recv, proj: srv.AddProject(spec)}
}

// call makes a REST call under /api/v4 with token and a JSON body (nil for
// none) and returns the status, headers and raw body.
func (e *env) call(method, path, tok string, body any) (int, http.Header, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.srv.URL()+"/api/v4"+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("PRIVATE-TOKEN", tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// must makes a call that must answer want, and decodes the answer.
func (e *env) must(want int, method, path, tok string, body any) map[string]any {
	e.t.Helper()
	st, _, b := e.call(method, path, tok, body)
	if st != want {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, st, want, b)
	}
	var m map[string]any
	if len(b) > 0 && b[0] == '{' {
		if err := json.Unmarshal(b, &m); err != nil {
			e.t.Fatalf("%s %s: decoding %s: %v", method, path, b, err)
		}
	}
	return m
}

func (e *env) projPath(rest string) string { return "/projects/" + itoa(e.proj.ID) + rest }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// openMR creates branch, one commit and an MR from it, and returns the MR.
func (e *env) openMR(branch string) map[string]any {
	e.t.Helper()
	e.must(201, "POST", e.projPath("/repository/branches"), robotToken, map[string]any{"branch": branch, "ref": e.proj.DefaultBranch})
	e.must(201, "POST", e.projPath("/repository/commits"), robotToken, map[string]any{
		"branch": branch, "commit_message": "Add " + branch,
		"actions": []any{map[string]any{"action": "create", "file_path": branch + ".yaml", "content": "a: 1\n"}},
	})
	return e.must(201, "POST", e.projPath("/merge_requests"), robotToken, map[string]any{
		"source_branch": branch, "target_branch": e.proj.DefaultBranch, "title": "Change " + branch,
	})
}

func contextWithTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

func (e *env) idle() {
	e.t.Helper()
	ctx, cancel := contextWithTimeout()
	defer cancel()
	if err := e.srv.WaitIdle(ctx); err != nil {
		e.t.Fatal(err)
	}
}

func mrPath(e *env, mr map[string]any, rest string) string {
	return e.projPath("/merge_requests/" + itoa(int64(mr["iid"].(float64))) + rest)
}
