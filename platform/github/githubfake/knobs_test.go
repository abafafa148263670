package githubfake

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRequestLimit: the request beyond PerWindow in a window answers
// GitHub's primary limit (403, remaining 0, reset at the window's end);
// the next window starts afresh; another account has its own window.
func TestRequestLimit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	srv := New(Options{NowFunc: func() time.Time { return now }})
	t.Cleanup(srv.Close)
	srv.AddUser("a", "tok-a")
	srv.AddUser("b", "tok-b")
	srv.SetRequestLimit(RequestLimit{PerWindow: 2, Window: time.Hour})
	get := func(tok string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL()+"/user", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	for i, want := range []struct {
		status    int
		remaining string
	}{{200, "1"}, {200, "0"}, {403, "0"}} {
		resp := get("tok-a")
		if resp.StatusCode != want.status || resp.Header.Get("X-Ratelimit-Remaining") != want.remaining ||
			resp.Header.Get("X-Ratelimit-Reset") != strconv.FormatInt(now.Add(time.Hour).Unix(), 10) {
			t.Errorf("call %d: %d remaining %s reset %s", i+1, resp.StatusCode, resp.Header.Get("X-Ratelimit-Remaining"), resp.Header.Get("X-Ratelimit-Reset"))
		}
	}
	if resp := get("tok-b"); resp.StatusCode != 200 {
		t.Errorf("another account: %d; want 200", resp.StatusCode)
	}
	now = now.Add(time.Hour)
	if resp := get("tok-a"); resp.StatusCode != 200 {
		t.Errorf("next window: %d; want 200", resp.StatusCode)
	}
}

// TestWebhookChaos: duplicates keep the delivery's GUID, drops are
// recorded and not sent, paused deliveries wait for ResumeWebhooks.
func TestWebhookChaos(t *testing.T) {
	t.Parallel()
	rv := &receiver{}
	hooks := httptest.NewServer(rv)
	t.Cleanup(hooks.Close)
	srv := New(Options{WebhookURL: hooks.URL, WebhookSecret: "s"})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken)
	repo := srv.AddRepo(RepoSpec{FullName: "acme/config", NoCI: true})
	count := func() int { rv.mu.Lock(); defer rv.mu.Unlock(); return len(rv.got) }

	srv.SetWebhookChaos(WebhookChaos{DuplicateRate: 1, Seed: 1})
	srv.PushToBranch(repo.ID, "main", "changebot")
	if err := srv.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	rv.mu.Lock()
	if len(rv.got) != 2 || rv.got[0].Header.Get("X-GitHub-Delivery") != rv.got[1].Header.Get("X-GitHub-Delivery") {
		t.Errorf("duplicated push: %d deliveries; want 2 with one GUID", len(rv.got))
	}
	rv.mu.Unlock()

	srv.SetWebhookChaos(WebhookChaos{DropRate: 1, Seed: 1})
	srv.PushToBranch(repo.ID, "main", "changebot")
	if err := srv.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	ws := srv.Webhooks()
	if n := count(); n != 2 || !ws[len(ws)-1].Dropped {
		t.Errorf("dropped push: %d received, last recorded %+v; want none more, recorded as dropped", n, ws[len(ws)-1])
	}

	srv.SetWebhookChaos(WebhookChaos{})
	srv.PauseWebhooks()
	srv.PushToBranch(repo.ID, "main", "changebot")
	time.Sleep(20 * time.Millisecond) // a paused queue must not send; nothing to wait for
	if n := count(); n != 2 {
		t.Errorf("while paused: %d received; want 2", n)
	}
	srv.ResumeWebhooks()
	if err := srv.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 3 {
		t.Errorf("after resume: %d received; want 3", n)
	}
}

// TestFakeCommentsEndpoint: a person comments through FakeCommentsPath
// without a token; bad input is a 4xx that changes nothing.
func TestFakeCommentsEndpoint(t *testing.T) {
	t.Parallel()
	srv := New(Options{})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken)
	srv.AddUser("dave", "")
	repo := srv.AddRepo(RepoSpec{FullName: "acme/config", NoCI: true, Collaborators: map[string]string{"changebot": "write"}})
	e := &env{t: t, srv: srv}
	e.must(201, "POST", "/repos/acme/config/git/refs", robotToken, map[string]any{"ref": "refs/heads/f", "sha": srv.PushToBranch(repo.ID, "main", "dave")})
	srv.PushToBranch(repo.ID, "f", "dave")
	e.must(201, "POST", "/repos/acme/config/pulls", robotToken, map[string]any{"title": "t", "head": "f", "base": "main"})
	for _, tt := range []struct {
		path, body string
		want       int
	}{
		{"/-/fake/repos/acme/config/issues/1/comments", `{"login":"dave","body":"/retry"}`, 201},
		{"/-/fake/repos/acme/config/issues/1/comments", `{"login":"","body":"/retry"}`, 400},
		{"/-/fake/repos/acme/config/issues/1/comments", `{"login":"dave"}`, 400},
		{"/-/fake/repos/acme/config/issues/1/comments", `not json`, 400},
		{"/-/fake/repos/acme/config/issues/9/comments", `{"login":"dave","body":"x"}`, 404},
		{"/-/fake/repos/acme/config/issues/1/comments", `{"login":"nobody","body":"x"}`, 404},
		{"/-/fake/other", `{}`, 404},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL()+tt.path, strings.NewReader(tt.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("POST %s %s = %d; want %d", tt.path, tt.body, resp.StatusCode, tt.want)
		}
	}
	if cs := srv.Comments(repo.ID, 1); len(cs) != 1 || cs[0].Login != "dave" || cs[0].Body != "/retry" {
		t.Errorf("comments = %+v; want dave's /retry only", cs)
	}
}
