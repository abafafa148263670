package github_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"changebot/internal/fixture"
	"changebot/platform"
	"changebot/platform/github"
	"changebot/platform/github/githubfake"
)

// clock is an injected clock shared by the fake and the adapter.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

func newClock() *clock { return &clock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)} }

// TestAppInstallationToken authenticates as a GitHub App: the JWT is
// exchanged for an installation token, which is cached, renewed five
// minutes before its one-hour expiry (injected clock), and the App's bot
// user is the author.
func TestAppInstallationToken(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	clk := newClock()
	srv := githubfake.New(githubfake.Options{NowFunc: clk.Now})
	t.Cleanup(srv.Close)
	app := srv.AddApp("changebot-app", &key.PublicKey)
	srv.AddUser("reviewer-a", reviewerTokenA)
	repo := srv.AddRepo(githubfake.RepoSpec{FullName: "acme/config", Collaborators: map[string]string{"reviewer-a": "write"}})
	c, err := github.New(github.Config{
		BaseURL:        srv.URL(),
		App:            &github.AppAuth{AppID: app.ID, InstallationID: app.InstallationID, PrivateKeyPEM: pemKey},
		ReviewerTokens: []string{reviewerTokenA},
		NowFunc:        clk.Now,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := t.Context()
	robot, err := c.CurrentUser(ctx)
	if err != nil || robot != (platform.User{ID: app.Bot.ID, Username: "changebot-app[bot]"}) {
		t.Fatalf("CurrentUser = %+v, %v; want the App's bot user", robot, err)
	}
	read := func() {
		t.Helper()
		if _, err := c.Branch(ctx, repo.ID, "main"); err != nil {
			t.Fatalf("Branch as the installation: %v", err)
		}
	}
	read()
	read()
	if n := srv.InstallationTokens(); n != 1 {
		t.Fatalf("installation tokens after two reads = %d; want 1 (cached)", n)
	}
	clk.Add(54 * time.Minute)
	read()
	if n := srv.InstallationTokens(); n != 1 {
		t.Errorf("installation tokens at 54 min = %d; want still 1", n)
	}
	clk.Add(2 * time.Minute) // 56 min: within 5 min of the expiry
	read()
	if n := srv.InstallationTokens(); n != 2 {
		t.Errorf("installation tokens at 56 min = %d; want 2 (renewed before expiry)", n)
	}
	// The author is the App: a pull request it opened it cannot approve,
	// the reviewer can.
	if _, err := c.CreateBranch(ctx, repo.ID, "f", "main"); err != nil {
		t.Fatal(err)
	}
	cm, err := c.CreateCommit(ctx, repo.ID, platform.CommitParams{Branch: "f", Message: "m", Actions: []platform.FileAction{{Action: "create", FilePath: "x", Content: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	mr, err := c.CreateMergeRequest(ctx, repo.ID, platform.CreateMRParams{SourceBranch: "f", TargetBranch: "main", Title: "t"})
	if err != nil || mr.Author.ID != app.Bot.ID {
		t.Fatalf("CreateMergeRequest = %+v, %v; want authored by the bot", mr, err)
	}
	if err := c.Approve(ctx, 0, repo.ID, mr.IID, cm.SHA); err != nil {
		t.Errorf("Approve as the reviewer: %v", err)
	}
	if n := srv.CallCount("POST", "/app/installations/*/access_tokens"); n != 2 {
		t.Errorf("token exchanges = %d; want 2", n)
	}

	// A JWT signed with another key is refused: 401, not transient.
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	bad, err := github.New(github.Config{BaseURL: srv.URL(), NowFunc: clk.Now,
		App: &github.AppAuth{AppID: app.ID, InstallationID: app.InstallationID,
			PrivateKeyPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Branch(ctx, repo.ID, "main")
	if !errors.Is(err, platform.ErrForbidden) || platform.StatusOf(err) != 401 {
		t.Errorf("wrong key: err = %v; want a 401 refusal", err)
	}
	if strings.Contains(err.Error(), "BEGIN") {
		t.Errorf("error shows the key: %v", err)
	}
}

// TestNewRefusesBadConfig reports every problem at once.
func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  github.Config
		want []string
	}{
		{name: "nothing", cfg: github.Config{}, want: []string{"robot token is empty"}},
		{name: "both", cfg: github.Config{Token: "t", App: &github.AppAuth{AppID: 1, InstallationID: 2, PrivateKeyPEM: []byte("x")}}, want: []string{"either", "private key"}},
		{name: "bad app", cfg: github.Config{App: &github.AppAuth{PrivateKeyPEM: []byte("not pem")}}, want: []string{"App id", "installation id", "private key"}},
		{name: "empty reviewer", cfg: github.Config{Token: "t", ReviewerTokens: []string{" "}}, want: []string{"reviewer token 0"}},
		{name: "bad url", cfg: github.Config{Token: "t", BaseURL: "ftp://x"}, want: []string{"scheme"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := github.New(tt.cfg)
			if err == nil {
				t.Fatal("New accepted the config")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v; want it to mention %q", err, w)
				}
			}
		})
	}
}

// answerServer answers every request with status, headers and body, and
// counts requests.
func answerServer(t *testing.T, status int, headers map[string]string, body []byte) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(ts.Close)
	return ts, &n
}

// TestRateLimits maps GitHub's primary and secondary rate limits onto
// platform.ErrRateLimited with the wait GitHub asked for (docs.github.com
// "Rate limits for the REST API"; fixture
// api-error-403-secondary-rate-limit-2018.json), and a plain 403 onto a
// refusal.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	clk := newClock()
	reset := clk.Now().Add(90 * time.Second).Unix()
	tests := []struct {
		name      string
		status    int
		headers   map[string]string
		body      []byte
		wantKind  error
		wantWait  time.Duration
		wantCalls int32
	}{
		{name: "primary 403", status: 403, body: []byte(`{"message":"API rate limit exceeded for installation ID 1."}`),
			headers:  map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": itoa(reset)},
			wantKind: platform.ErrRateLimited, wantWait: 90 * time.Second, wantCalls: 1},
		{name: "primary 429", status: 429, body: []byte(`{"message":"API rate limit exceeded"}`),
			headers:  map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": itoa(reset)},
			wantKind: platform.ErrRateLimited, wantWait: 90 * time.Second, wantCalls: 1},
		{name: "primary with the reset already past on the local clock", status: 403, body: []byte(`{"message":"API rate limit exceeded for installation ID 1."}`),
			headers:  map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": itoa(clk.Now().Add(-30 * time.Second).Unix())},
			wantKind: platform.ErrRateLimited, wantWait: github.MinResetWait, wantCalls: 1},
		{name: "secondary 2018 with Retry-After", status: 403, body: fixture.GitHub(t, "api-error-403-secondary-rate-limit-2018.json"),
			headers:  map[string]string{"Retry-After": "60"},
			wantKind: platform.ErrRateLimited, wantWait: 60 * time.Second, wantCalls: 1},
		{name: "secondary message only", status: 403,
			body:     []byte(`{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`),
			headers:  map[string]string{"X-Ratelimit-Remaining": "14", "X-Ratelimit-Reset": itoa(reset)},
			wantKind: platform.ErrRateLimited, wantWait: github.DefaultSecondaryWait, wantCalls: 1},
		{name: "short Retry-After retried in the client", status: 429, body: []byte(`{"message":"slow down"}`),
			headers:  map[string]string{"Retry-After": "0"},
			wantKind: platform.ErrRateLimited, wantCalls: 3},
		{name: "plain 403", status: 403, body: []byte(`{"message":"Resource not accessible by integration"}`),
			headers:  map[string]string{"X-Ratelimit-Remaining": "4000"},
			wantKind: platform.ErrForbidden, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts, n := answerServer(t, tt.status, tt.headers, tt.body)
			c, err := github.New(github.Config{BaseURL: ts.URL, Token: robotToken, NowFunc: clk.Now,
				RetryWaitMin: time.Millisecond, RetryWaitMax: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Project(t.Context(), "acme/config")
			if !errors.Is(err, tt.wantKind) {
				t.Fatalf("err = %v; want %v", err, tt.wantKind)
			}
			if got := platform.RetryAfterOf(err); got != tt.wantWait {
				t.Errorf("RetryAfter = %v; want %v", got, tt.wantWait)
			}
			if transient := platform.IsTransient(err); transient != errors.Is(tt.wantKind, platform.ErrRateLimited) {
				t.Errorf("IsTransient = %v", transient)
			}
			if got := n.Load(); got != tt.wantCalls {
				t.Errorf("requests = %d; want %d", got, tt.wantCalls)
			}
		})
	}
}

// TestErrorKinds maps GitHub's per-endpoint answers onto the platform
// kinds (fixtures api-pulls-merge-405.json, api-pulls-merge-409.json) and
// retries 5xx of reads only.
func TestErrorKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		status    int
		body      []byte
		call      func(ctx context.Context, c *github.Client) error
		want      error
		wantMsg   string
		wantCalls int32
	}{
		{name: "merge 405", status: 405, body: fixture.GitHub(t, "api-pulls-merge-405.json"), want: platform.ErrNotMergeable, wantMsg: "Pull Request is not mergeable", wantCalls: 1,
			call: func(ctx context.Context, c *github.Client) error {
				_, err := c.Merge(ctx, 7, 1, platform.MergeParams{SHA: "abc"})
				return err
			}},
		{name: "merge 409", status: 409, body: fixture.GitHub(t, "api-pulls-merge-409.json"), want: platform.ErrHeadMoved, wantMsg: "Head branch was modified. Review and try the merge again.", wantCalls: 1,
			call: func(ctx context.Context, c *github.Client) error {
				_, err := c.Merge(ctx, 7, 1, platform.MergeParams{SHA: "abc"})
				return err
			}},
		{name: "pull request exists", status: 422, want: platform.ErrAlreadyExists, wantMsg: "Validation Failed: A pull request already exists for acme:f.", wantCalls: 1,
			body: []byte(`{"message":"Validation Failed","errors":[{"resource":"PullRequest","code":"custom","message":"A pull request already exists for acme:f."}]}`),
			call: func(ctx context.Context, c *github.Client) error {
				_, err := c.CreateMergeRequest(ctx, 7, platform.CreateMRParams{SourceBranch: "f", TargetBranch: "main"})
				return err
			}},
		{name: "own approval", status: 422, want: platform.ErrForbidden, wantMsg: "Unprocessable Entity: Can not approve your own pull request", wantCalls: 1,
			body: []byte(`{"message":"Unprocessable Entity","errors":["Can not approve your own pull request"],"documentation_url":"https://docs.github.com/rest/reference/pulls#create-a-review-for-a-pull-request"}`),
			call: func(ctx context.Context, c *github.Client) error { return c.Approve(ctx, 0, 7, 1, "") }},
		{name: "update-branch conflict", status: 422, want: platform.ErrConflict, wantMsg: "merge conflict between base and head", wantCalls: 1,
			body: []byte(`{"message":"merge conflict between base and head"}`),
			call: func(ctx context.Context, c *github.Client) error { return c.Rebase(ctx, 7, 1) }},
		{name: "update-branch stale head", status: 422, want: platform.ErrHeadMoved, wantMsg: "expected head sha didn't match current head ref.", wantCalls: 1,
			body: []byte(`{"message":"expected head sha didn't match current head ref."}`),
			call: func(ctx context.Context, c *github.Client) error { return c.Rebase(ctx, 7, 1) }},
		{name: "read 502 retried", status: 502, body: []byte(`{"message":"Server Error"}`), want: platform.ErrUnavailable, wantCalls: 1 + github.DefaultRetryMax,
			call: func(ctx context.Context, c *github.Client) error { _, err := c.Branch(ctx, 7, "main"); return err }},
		{name: "write 502 not retried", status: 502, body: []byte(`{"message":"Server Error"}`), want: platform.ErrUnavailable, wantCalls: 1,
			call: func(ctx context.Context, c *github.Client) error { _, err := c.CreateNote(ctx, 7, 1, "x"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int32
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				switch {
				case r.URL.Path == "/repositories/7":
					_, _ = w.Write([]byte(`{"id":7,"name":"config","full_name":"acme/config","owner":{"login":"acme"},"allow_merge_commit":true}`))
				case r.URL.Path == "/repos/acme/config" && r.Method == "GET":
					_, _ = w.Write([]byte(`{"id":7,"name":"config","full_name":"acme/config","owner":{"login":"acme"},"allow_merge_commit":true}`))
				case r.URL.Path == "/repos/acme/config/pulls/1" && r.Method == "GET":
					_, _ = w.Write([]byte(`{"number":1,"state":"open","head":{"sha":""}}`))
				default:
					n.Add(1)
					w.WriteHeader(tt.status)
					_, _ = w.Write(tt.body)
				}
			}))
			t.Cleanup(ts.Close)
			c, err := github.New(github.Config{BaseURL: ts.URL, Token: robotToken, ReviewerTokens: []string{reviewerTokenA},
				RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			err = tt.call(t.Context(), c)
			var pe *platform.Error
			if !errors.Is(err, tt.want) || !errors.As(err, &pe) || pe.Status != tt.status {
				t.Fatalf("err = %v; want %v with status %d", err, tt.want, tt.status)
			}
			if tt.wantMsg != "" && pe.Message != tt.wantMsg {
				t.Errorf("Message = %q; want %q", pe.Message, tt.wantMsg)
			}
			if strings.Contains(err.Error(), robotToken) {
				t.Errorf("error leaks the token: %v", err)
			}
			if got := n.Load(); got != tt.wantCalls {
				t.Errorf("requests = %d; want %d", got, tt.wantCalls)
			}
		})
	}
}

// TestMergeableNullReadAgain: GitHub answers mergeable null while it
// computes the test merge; the adapter reads again (bounded) and never
// takes null for "not mergeable".
func TestMergeableNullReadAgain(t *testing.T) {
	t.Parallel()
	t.Run("fake computes on the second read", func(t *testing.T) {
		t.Parallel()
		f := newFakeEnv(t, githubfake.Options{}, githubfake.RepoSpec{}, github.Config{})
		_, mr := change(t, f, "feature")
		f.env.WaitIdle(t)
		before := f.srv.CallCount("GET", "/repos/acme/config/pulls/*")
		got, err := f.c.MergeRequest(t.Context(), f.repo.ID, mr.IID, false)
		if err != nil || got.DetailedMergeStatus != "mergeable" || got.HasConflicts {
			t.Fatalf("MergeRequest = %+v, %v; want mergeable", got, err)
		}
		if n := f.srv.CallCount("GET", "/repos/acme/config/pulls/*") - before; n != 2 {
			t.Errorf("pull reads = %d; want 2 (null, then computed)", n)
		}
	})
	t.Run("still null after the bounded reads", func(t *testing.T) {
		t.Parallel()
		var reads atomic.Int32
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/repositories/7":
				_, _ = w.Write([]byte(`{"id":7,"name":"config","full_name":"acme/config","owner":{"login":"acme"}}`))
			case "/repos/acme/config/pulls/1":
				reads.Add(1)
				_, _ = w.Write([]byte(`{"number":1,"state":"open","mergeable":null,"mergeable_state":"unknown","head":{"sha":"abc","ref":"f"},"base":{"ref":"main"}}`))
			case "/repos/acme/config/commits/abc/check-runs":
				_, _ = w.Write([]byte(`{"total_count":0,"check_runs":[]}`))
			case "/repos/acme/config/commits/abc/status":
				_, _ = w.Write([]byte(`{"state":"pending","statuses":[]}`))
			case "/repos/acme/config/branches/main":
				_, _ = w.Write([]byte(`{"name":"main","protected":false}`))
			default:
				w.WriteHeader(404)
			}
		}))
		t.Cleanup(ts.Close)
		var slept []time.Duration
		c, err := github.New(github.Config{BaseURL: ts.URL, Token: robotToken, MergeableWait: 100 * time.Millisecond,
			SleepFunc: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.MergeRequest(t.Context(), 7, 1, false)
		if err != nil || got.DetailedMergeStatus != "checking" || got.HasConflicts {
			t.Fatalf("MergeRequest = %+v, %v; want checking, no conflict", got, err)
		}
		if n := reads.Load(); n != github.DefaultMergeableReads {
			t.Errorf("reads = %d; want %d", n, github.DefaultMergeableReads)
		}
		if len(slept) != 2 || slept[0] != 100*time.Millisecond || slept[1] != 200*time.Millisecond {
			t.Errorf("waits = %v; want [100ms 200ms]", slept)
		}
	})
}

// change opens a pull request from a new branch with one commit.
func change(t *testing.T, f *fakeEnv, branch string) (platform.Commit, platform.MergeRequest) {
	t.Helper()
	ctx := t.Context()
	if _, err := f.c.CreateBranch(ctx, f.repo.ID, branch, "main"); err != nil {
		t.Fatal(err)
	}
	cm, err := f.c.CreateCommit(ctx, f.repo.ID, platform.CommitParams{Branch: branch, Message: "m",
		Actions: []platform.FileAction{{Action: "create", FilePath: branch + ".txt", Content: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	mr, err := f.c.CreateMergeRequest(ctx, f.repo.ID, platform.CreateMRParams{SourceBranch: branch, TargetBranch: "main", Title: branch})
	if err != nil {
		t.Fatal(err)
	}
	return cm, mr
}

// TestRequiredContextPending: a required context nothing reported keeps
// the head's pipeline running, so approvals of a green-looking head do not
// merge; once reported it decides.
func TestRequiredContextPending(t *testing.T) {
	t.Parallel()
	f := newFakeEnv(t, githubfake.Options{}, githubfake.RepoSpec{RequiredContexts: []string{"build", "ci/external"}, RequiredApprovals: 1}, github.Config{})
	cm, mr := change(t, f, "feature")
	f.env.WaitIdle(t)
	ctx := t.Context()
	got, err := f.c.MergeRequest(ctx, f.repo.ID, mr.IID, false)
	if err != nil || got.HeadPipeline == nil || got.HeadPipeline.Status != "running" || got.HeadPipeline.Finished() {
		t.Fatalf("head pipeline = %+v, %v; want running while ci/external is missing", got.HeadPipeline, err)
	}
	if got.DetailedMergeStatus != "ci_still_running" {
		t.Errorf("DetailedMergeStatus = %q; want ci_still_running", got.DetailedMergeStatus)
	}
	f.srv.SetStatus(f.repo.ID, cm.SHA, "ci/external", "failure")
	got, _ = f.c.MergeRequest(ctx, f.repo.ID, mr.IID, false)
	if got.HeadPipeline.Status != platform.PipelineFailed || got.DetailedMergeStatus != "ci_must_pass" {
		t.Errorf("after a failed status: pipeline %+v, status %q; want failed, ci_must_pass", got.HeadPipeline, got.DetailedMergeStatus)
	}
	f.srv.SetStatus(f.repo.ID, cm.SHA, "ci/external", "success")
	got, _ = f.c.MergeRequest(ctx, f.repo.ID, mr.IID, false)
	if got.HeadPipeline.Status != platform.PipelineSuccess || got.DetailedMergeStatus != "not_approved" {
		t.Errorf("after success: pipeline %+v, status %q; want success, not_approved", got.HeadPipeline, got.DetailedMergeStatus)
	}
	if err := f.c.Approve(ctx, 0, f.repo.ID, mr.IID, cm.SHA); err != nil {
		t.Fatal(err)
	}
	got, _ = f.c.MergeRequest(ctx, f.repo.ID, mr.IID, false)
	if got.DetailedMergeStatus != "mergeable" {
		t.Errorf("after the approval: %q; want mergeable", got.DetailedMergeStatus)
	}
}

// TestMemberAccessScale maps collaborator permissions onto the access
// levels the command rules use.
func TestMemberAccessScale(t *testing.T) {
	t.Parallel()
	f := newFakeEnv(t, githubfake.Options{}, githubfake.RepoSpec{}, github.Config{})
	for perm, want := range map[string]int{"read": 20, "triage": 20, "write": 30, "maintain": 40, "admin": 50, "": 0} {
		login := "user-" + perm
		u := f.srv.AddUser(login, "")
		f.srv.SetPermission(f.repo.ID, login, perm)
		if got, err := f.c.MemberAccess(t.Context(), f.repo.ID, u.ID); err != nil || got != want {
			t.Errorf("MemberAccess(%q) = %d, %v; want %d", perm, got, err, want)
		}
	}
	reads := f.srv.CallCount("GET", "/user/*")
	for range 3 {
		if _, err := f.c.MemberAccess(t.Context(), f.repo.ID, f.env.Reviewers[0].ID); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.srv.CallCount("GET", "/user/*") - reads; n != 1 {
		t.Errorf("login reads for three checks of one user = %d; want 1 (cached)", n)
	}
	if got, err := f.c.MemberAccess(t.Context(), f.repo.ID, 999999); err != nil || got != 0 {
		t.Errorf("MemberAccess(unknown user) = %d, %v; want 0, nil", got, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// memWaits is an in-memory AccountWaits shared by two clients, as the
// database is by two replicas.
type memWaits struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (w *memWaits) AccountBlockedUntil(_ context.Context, account string) (time.Time, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[account], nil
}

func (w *memWaits) BlockAccountUntil(_ context.Context, account string, until time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m[account] = until
	return nil
}

// TestAccountWaitsShared: after one replica's secondary rate limit, the
// other replica with the same token does not call GitHub until the wait
// is over; another token still may.
func TestAccountWaitsShared(t *testing.T) {
	t.Parallel()
	clk := newClock()
	srv := githubfake.New(githubfake.Options{NowFunc: clk.Now})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken)
	srv.AddUser("reviewer-a", reviewerTokenA)
	repo := srv.AddRepo(githubfake.RepoSpec{FullName: "acme/config"})
	waits := &memWaits{m: map[string]time.Time{}}
	replica := func(tok string) *github.Client {
		c, err := github.New(github.Config{BaseURL: srv.URL(), Token: tok, NowFunc: clk.Now, AccountWaits: waits, RetryMax: -1})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b, other := replica(robotToken), replica(robotToken), replica(reviewerTokenA)
	srv.InjectFault(githubfake.SecondaryRateLimit("GET", "/repositories/*", 1, "30"))
	_, err := a.Branch(t.Context(), repo.ID, "main")
	if !errors.Is(err, platform.ErrRateLimited) || platform.RetryAfterOf(err) != 30*time.Second {
		t.Fatalf("replica a: err = %v; want a 30 s rate limit", err)
	}
	calls := len(srv.Calls())
	_, err = b.Branch(t.Context(), repo.ID, "main")
	if !errors.Is(err, platform.ErrRateLimited) || platform.RetryAfterOf(err) != 30*time.Second || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("replica b during the wait: err = %v; want held back with 30 s left", err)
	}
	if n := len(srv.Calls()); n != calls {
		t.Errorf("replica b sent %d requests during the wait; want none", n-calls)
	}
	if _, err := other.Branch(t.Context(), repo.ID, "main"); err != nil {
		t.Errorf("another account during the wait: %v", err)
	}
	clk.Add(31 * time.Second)
	if _, err := b.Branch(t.Context(), repo.ID, "main"); err != nil {
		t.Errorf("replica b after the wait: %v", err)
	}
}

// TestAccountWaitsOnTheSharedClock: two replicas of one token whose own
// clocks (NowFunc) differ by 5 minutes measure the account's wait on the
// shared clock (WaitsNowFunc, the database's in serve): the 30 s GitHub
// named for one holds the other for those 30 s, whichever is ahead, and no
// longer (issue 21 point 6). On NowFunc the replica behind would be held
// 5 min 30 s by the ahead one's wait, and the ahead one not at all by the
// other's.
func TestAccountWaitsOnTheSharedClock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		aheadRecords bool
	}{
		{name: "the replica ahead meets the rate limit", aheadRecords: true},
		{name: "the replica behind meets the rate limit", aheadRecords: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := newClock() // the shared clock
			srv := githubfake.New(githubfake.Options{NowFunc: clk.Now})
			t.Cleanup(srv.Close)
			srv.AddUser("changebot", robotToken)
			repo := srv.AddRepo(githubfake.RepoSpec{FullName: "acme/config"})
			waits := &memWaits{m: map[string]time.Time{}}
			replica := func(own func() time.Time) *github.Client {
				c, err := github.New(github.Config{BaseURL: srv.URL(), Token: robotToken, NowFunc: own, WaitsNowFunc: clk.Now,
					AccountWaits: waits, RetryMax: -1})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			ahead := replica(func() time.Time { return clk.Now().Add(5 * time.Minute) })
			behind := replica(clk.Now)
			first, second := behind, ahead
			if tc.aheadRecords {
				first, second = ahead, behind
			}
			srv.InjectFault(githubfake.SecondaryRateLimit("GET", "/repositories/*", 1, "30"))
			if _, err := first.Branch(t.Context(), repo.ID, "main"); !errors.Is(err, platform.ErrRateLimited) {
				t.Fatalf("first replica: err = %v; want a rate limit", err)
			}
			_, err := second.Branch(t.Context(), repo.ID, "main")
			if !errors.Is(err, platform.ErrRateLimited) || platform.RetryAfterOf(err) != 30*time.Second || !strings.Contains(err.Error(), "not sent") {
				t.Fatalf("second replica during the wait: err = %v (retry after %s); want held back with 30 s left", err, platform.RetryAfterOf(err))
			}
			clk.Add(31 * time.Second)
			if _, err := second.Branch(t.Context(), repo.ID, "main"); err != nil {
				t.Errorf("second replica 31 s later: %v; want sent", err)
			}
		})
	}
}

// TestPipelinesOfBranch: without a sha, the newest commits of the branch
// are read newest first until one succeeded; commits without checks have
// no pipeline.
func TestPipelinesOfBranch(t *testing.T) {
	t.Parallel()
	f := newFakeEnv(t, githubfake.Options{}, githubfake.RepoSpec{NoCI: true}, github.Config{})
	id := f.repo.ID
	old := f.srv.PushToBranch(id, "main", "outsider")
	f.srv.SetCheckRun(id, old, "deploy", "github-actions", "completed", "success")
	mid := f.srv.PushToBranch(id, "main", "outsider")
	f.srv.SetStatus(id, mid, "deploy/prod", "success")
	f.srv.PushToBranch(id, "main", "outsider") // no checks at all
	tip := f.srv.PushToBranch(id, "main", "outsider")
	f.srv.SetCheckRun(id, tip, "deploy", "github-actions", "in_progress", "")
	before := f.srv.CallCount("GET", "/repos/acme/config/commits/*/check-runs")
	ps, err := f.c.Pipelines(t.Context(), id, "main", "")
	if err != nil || len(ps) != 2 || ps[0].SHA != tip || ps[0].Status != "running" || ps[1].SHA != mid || ps[1].Status != platform.PipelineSuccess || ps[1].Ref != "main" {
		t.Fatalf("Pipelines(main) = %+v, %v; want the running tip, then the successful commit before the one without checks", ps, err)
	}
	if n := f.srv.CallCount("GET", "/repos/acme/config/commits/*/check-runs") - before; n != 3 {
		t.Errorf("check-run reads = %d; want 3 (tip, the commit without checks, the successful one; not the oldest)", n)
	}
	if ps, err := f.c.Pipelines(t.Context(), id, "main", old); err != nil || len(ps) != 1 || ps[0].SHA != old || ps[0].Status != platform.PipelineSuccess {
		t.Errorf("Pipelines(main, old) = %+v, %v", ps, err)
	}
}

// TestAppTokenRevokedEarly (issue 21 point 4): an installation token
// GitHub refuses with 401 before the adapter would renew it (revoked, the
// App re-keyed, or the local clock behind GitHub's) is renewed inside the
// transport and the same request sent once more, a write with its body;
// the call succeeds and no 401 reaches the flows, which would end the
// change in HANDLE_NOT_MERGEABLE or HANDLE_REVIEWER_DENIED. Only a 401 on
// a token minted for the request is a refusal (ErrForbidden, status 401).
func TestAppTokenRevokedEarly(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	const branchRead = "/repos/acme/config/git/ref/heads/main"
	tests := []struct {
		name string
		// skew is how far GitHub's clock is ahead of the adapter's.
		skew time.Duration
		// warm makes one call first, so that a token is cached; open also
		// opens pull request #1.
		warm, open bool
		// before runs between the warm-up and the call.
		before func(srv *githubfake.Server, clk *clock)
		// call is the call checked; nil reads main.
		call func(ctx context.Context, c *github.Client, repo githubfake.Repo) error
		// path is the request whose sends are counted (a pattern, as
		// githubfake.CallCount's); "" is the read of main.
		path       string
		wantStatus int // 0: success
		wantTokens int
		// wantSends are the sends of the checked call's request.
		wantSends []int
	}{
		{name: "revoked token renewed, the read sent again", warm: true,
			before:     func(srv *githubfake.Server, _ *clock) { srv.ExpireTokens() },
			wantTokens: 2, wantSends: []int{401, 200}},
		{name: "revoked token renewed, the write sent again with its body", warm: true, open: true,
			before: func(srv *githubfake.Server, _ *clock) { srv.ExpireTokens() },
			call: func(ctx context.Context, c *github.Client, repo githubfake.Repo) error {
				_, err := c.CreateNote(ctx, repo.ID, 1, "status: the body sent twice")
				return err
			},
			path: "/repos/acme/config/issues/1/comments", wantTokens: 2, wantSends: []int{401, 201}},
		{name: "local clock 7 minutes behind GitHub's: expired by GitHub's clock first", skew: 7 * time.Minute, warm: true,
			before:     func(_ *githubfake.Server, clk *clock) { clk.Add(61 * time.Minute) },
			wantTokens: 2, wantSends: []int{401, 200}},
		{name: "401 on a freshly minted token is a refusal", path: "/repositories/*",
			before: func(srv *githubfake.Server, _ *clock) {
				srv.InjectFault(githubfake.Fault{Method: "GET", PathPattern: "/repositories/*", Status: 401, Times: 1,
					Body: `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`})
			},
			wantStatus: 401, wantTokens: 1, wantSends: []int{401}},
		{name: "401 again on the renewed token is a refusal", warm: true,
			before: func(srv *githubfake.Server, _ *clock) {
				srv.InjectFault(githubfake.Fault{Method: "GET", PathPattern: branchRead, Status: 401, Times: 2,
					Body: `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`})
			},
			wantStatus: 401, wantTokens: 2, wantSends: []int{401, 401}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			srv := githubfake.New(githubfake.Options{NowFunc: func() time.Time { return clk.Now().Add(tt.skew) }})
			t.Cleanup(srv.Close)
			app := srv.AddApp("changebot-app", &key.PublicKey)
			repo := srv.AddRepo(githubfake.RepoSpec{FullName: "acme/config", NoCI: true})
			c, err := github.New(github.Config{BaseURL: srv.URL(), NowFunc: clk.Now, RetryMax: -1,
				App: &github.AppAuth{AppID: app.ID, InstallationID: app.InstallationID, PrivateKeyPEM: pemKey}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tt.warm {
				if _, err := c.Project(ctx, repo.FullName); err != nil {
					t.Fatal(err)
				}
			}
			if tt.open {
				openPull(ctx, t, c, repo)
			}
			tt.before(srv, clk)
			sentBefore := len(srv.Calls())
			call := tt.call
			if call == nil {
				call = func(ctx context.Context, c *github.Client, repo githubfake.Repo) error {
					_, err := c.Branch(ctx, repo.ID, "main")
					return err
				}
			}
			err = call(ctx, c, repo)
			switch {
			case tt.wantStatus == 0 && err != nil:
				t.Fatalf("call: %v; want the renewed token to carry it", err)
			case tt.wantStatus != 0 && (!errors.Is(err, platform.ErrForbidden) || platform.StatusOf(err) != tt.wantStatus):
				t.Fatalf("call: %v; want a %d refusal", err, tt.wantStatus)
			}
			if n := srv.InstallationTokens(); n != tt.wantTokens {
				t.Errorf("installation tokens = %d; want %d", n, tt.wantTokens)
			}
			if tt.wantSends != nil {
				path := cmp.Or(tt.path, branchRead)
				var sends []int
				for _, cl := range srv.Calls()[sentBefore:] {
					if segmentsMatch(path, cl.Path) {
						sends = append(sends, cl.Status)
					}
				}
				if !slices.Equal(sends, tt.wantSends) {
					t.Errorf("sends: %v; want %v", sends, tt.wantSends)
				}
			}
			if tt.call != nil {
				cs := srv.Comments(repo.ID, 1)
				if len(cs) != 1 || cs[0].Body != "status: the body sent twice" {
					t.Errorf("comments %+v; want the one body, once", cs)
				}
			}
		})
	}
}

// segmentsMatch reports whether path matches pattern, where a "*" segment
// matches any one segment.
func segmentsMatch(pattern, path string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(xs) {
		return false
	}
	for i := range ps {
		if ps[i] != "*" && ps[i] != xs[i] {
			return false
		}
	}
	return true
}

// openPull opens a pull request through c from a new branch with one
// commit and returns its head and number.
func openPull(ctx context.Context, t *testing.T, c *github.Client, repo githubfake.Repo) (string, int64) {
	t.Helper()
	if _, err := c.CreateBranch(ctx, repo.ID, "feature", "main"); err != nil {
		t.Fatal(err)
	}
	cm, err := c.CreateCommit(ctx, repo.ID, platform.CommitParams{Branch: "feature", Message: "m",
		Actions: []platform.FileAction{{Action: "create", FilePath: "f.txt", Content: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	mr, err := c.CreateMergeRequest(ctx, repo.ID, platform.CreateMRParams{SourceBranch: "feature", TargetBranch: "main", Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	return cm.SHA, mr.IID
}

// TestConcurrentFirstUse: many goroutines using a fresh client at once
// share one installation token exchange and one bot-user read (the client
// is safe for concurrent use, and its caches fill once).
func TestConcurrentFirstUse(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	srv := githubfake.New(githubfake.Options{})
	t.Cleanup(srv.Close)
	app := srv.AddApp("changebot-app", &key.PublicKey)
	repo := srv.AddRepo(githubfake.RepoSpec{FullName: "acme/config"})
	c, err := github.New(github.Config{BaseURL: srv.URL(),
		App: &github.AppAuth{AppID: app.ID, InstallationID: app.InstallationID,
			PrivateKeyPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	start := make(chan struct{})
	errs := make(chan error, 2*n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, err := c.Branch(t.Context(), repo.ID, "main")
			errs <- err
		}()
		go func() {
			defer wg.Done()
			<-start
			u, err := c.CurrentUser(t.Context())
			if err == nil && u.ID != app.Bot.ID {
				err = errors.New("wrong user " + u.Username)
			}
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.InstallationTokens(); got != 1 {
		t.Errorf("installation tokens = %d; want 1 shared by %d goroutines", got, 2*n)
	}
	if got := srv.CallCount("GET", "/app"); got != 1 {
		t.Errorf("GET /app = %d; want 1", got)
	}
	if got := srv.CallCount("GET", "/repositories/*"); got > n {
		t.Errorf("repository reads = %d; want at most one per concurrent first caller", got)
	}
}
