package gitlab

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"changebot/internal/fixture"
)

const (
	robotToken     = "robot-secret-token-1f2e3d"
	reviewerTokenA = "reviewer-secret-token-aaa"
	reviewerTokenB = "reviewer-secret-token-bbb"
)

// answer is one canned response of the test server.
type answer struct {
	status  int
	fixture string // file under testdata/gitlab, served verbatim
	body    string // inline body when fixture is empty
	header  map[string]string
}

// seen is one request the test server received.
type seen struct {
	method, path, query string
	rawPath             string // full escaped path, API prefix included
	header              http.Header
	body                string
}

// server is a hand-written GitLab stand-in: it answers "METHOD /escaped/path"
// (relative to /api/v4) with queued answers (the last one repeats) and
// records every request.
type server struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	routes   map[string][]answer
	requests []seen
}

func newServer(t *testing.T) *server {
	t.Helper()
	s := &server{t: t, routes: map[string][]answer{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// on queues answers for "METHOD /path". A fixture answer is read here, in
// the test's goroutine, so a missing file fails the test by name before any
// request is made.
func (s *server) on(route string, answers ...answer) {
	s.t.Helper()
	for i := range answers {
		if answers[i].fixture != "" {
			answers[i].body = string(fixture.GitLab(s.t, answers[i].fixture))
			answers[i].fixture = ""
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[route] = append(s.routes[route], answers...)
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	_, path, _ := strings.Cut(r.URL.EscapedPath(), "/api/v4")
	key := r.Method + " " + path

	s.mu.Lock()
	s.requests = append(s.requests, seen{method: r.Method, path: path, rawPath: r.URL.EscapedPath(), query: r.URL.RawQuery, header: r.Header.Clone(), body: string(body)})
	queue := s.routes[key]
	var a answer
	ok := len(queue) > 0
	if ok {
		a = queue[0]
		if len(queue) > 1 {
			s.routes[key] = queue[1:]
		}
	}
	s.mu.Unlock()

	if !ok {
		s.t.Errorf("unexpected request %s", key)
		w.WriteHeader(http.StatusTeapot)
		return
	}
	payload := []byte(a.body)
	w.Header().Set("Content-Type", "application/json")
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	status := a.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(payload)
}

// seenRequests returns a copy of what the server received.
func (s *server) seenRequests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.requests...)
}

// count returns how many requests hit "METHOD /path".
func (s *server) count(route string) int {
	n := 0
	for _, r := range s.seenRequests() {
		if r.method+" "+r.path == route {
			n++
		}
	}
	return n
}

// newClient builds a Client against s with two reviewers, fast retries and a
// logger that writes to t.Log.
func newClient(t *testing.T, s *server, mutate ...func(*Config)) *Client {
	t.Helper()
	cfg := Config{
		BaseURL:        s.srv.URL,
		Token:          robotToken,
		ReviewerTokens: []string{reviewerTokenA, reviewerTokenB},
		Logger:         slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		RetryWaitMin:   time.Millisecond,
		RetryWaitMax:   20 * time.Millisecond,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// testWriter sends log output to t.Log (STYLE.md rule 29).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// assertNoSecrets fails when text mentions any configured token.
func assertNoSecrets(t *testing.T, text string) {
	t.Helper()
	for _, tok := range []string{robotToken, reviewerTokenA, reviewerTokenB} {
		if strings.Contains(text, tok) {
			t.Errorf("text leaks a token: %q", text)
		}
	}
}

// assertNoEventUUID fails when any request carried X-Gitlab-Event-UUID
// (DESIGN.md §1: GitLab would block the hooks our calls cause).
func assertNoEventUUID(t *testing.T, s *server) {
	t.Helper()
	for _, r := range s.seenRequests() {
		if v := r.header.Get("X-Gitlab-Event-UUID"); v != "" {
			t.Errorf("%s %s carried X-Gitlab-Event-UUID %q", r.method, r.path, v)
		}
	}
}
