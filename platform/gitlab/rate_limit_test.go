package gitlab_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
)

// waitsTable is an in-memory AccountWaits shared by the clients of a test,
// as the database row is shared by replicas (the store's own test covers
// the PostgreSQL side).
type waitsTable struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (w *waitsTable) AccountBlockedUntil(_ context.Context, account string) (time.Time, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.until[account], nil
}

func (w *waitsTable) BlockAccountUntil(_ context.Context, account string, until time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if until.After(w.until[account]) {
		w.until[account] = until
	}
	return nil
}

// testClock is a settable clock shared by the fake GitLab and the clients.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// TestAccountWaitsOutRateLimit: GitLab throttles the robot for 60 s, in
// each form of its rate-limit answer; two replicas (two clients sharing one
// table of waits) ask every 5 s. Exactly one request reaches GitLab during
// the window (the one answered 429), the others fail at once as
// platform.ErrRateLimited with the rest of the wait and are not sent, and
// the first request at or after the window's end is sent and succeeds. With
// no header at all the wait is one minute from the 429 (issue 10 point 4).
func TestAccountWaitsOutRateLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		headers gitlabfake.RateLimitHeaders
		window  time.Duration
	}{
		{name: "ratelimit-reset and resettime, no retry-after", headers: gitlabfake.RateLimitResetHeaders, window: 60 * time.Second},
		{name: "retry-after seconds", headers: gitlabfake.RateLimitRetryAfterSeconds, window: 60 * time.Second},
		{name: "retry-after http date", headers: gitlabfake.RateLimitRetryAfterDate, window: 60 * time.Second},
		{name: "no header", headers: gitlabfake.RateLimitNoHeaders, window: 45 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := &testClock{now: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
			srv := gitlabfake.New(gitlabfake.Options{NowFunc: clock.Now})
			t.Cleanup(srv.Close)
			srv.AddUser("changebot", robotToken, gitlabfake.AsBot())
			srv.AddUser("reviewer-a", reviewerTokenA, gitlabfake.AsBot())
			proj := srv.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "group/config",
				Members: map[string]int{"changebot": gitlabfake.AccessMaintainer, "reviewer-a": gitlabfake.AccessDeveloper}})
			waits := &waitsTable{until: map[string]time.Time{}}
			replica := func() *gitlab.Client {
				c, err := gitlab.New(gitlab.Config{BaseURL: srv.URL(), Token: robotToken, ReviewerTokens: []string{reviewerTokenA},
					AccountWaits: waits, NowFunc: clock.Now, RetryWaitMin: time.Millisecond, RetryWaitMax: 10 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			replicas := []*gitlab.Client{replica(), replica()}
			start := clock.Now()
			srv.InjectRateLimit(gitlabfake.RateLimit{User: "changebot", Until: start.Add(tt.window), Headers: tt.headers})

			// With no header the robot waits a minute from its 429, even
			// though this window ends earlier.
			end := start.Add(tt.window)
			if tt.headers == gitlabfake.RateLimitNoHeaders {
				end = start.Add(platform.DefaultRateLimitWait)
			}
			for i := 0; clock.Now().Before(end.Add(10 * time.Second)); i++ {
				now := clock.Now()
				_, err := replicas[i%2].Project(t.Context(), proj.PathWithNamespace)
				switch {
				case now.Before(end):
					d, ok := platform.RateLimitWait(err)
					if !ok || platform.StatusOf(err) != http.StatusTooManyRequests {
						t.Fatalf("at +%s: err = %v; want a rate limit", now.Sub(start), err)
					}
					if want := end.Sub(now); d != want {
						t.Errorf("at +%s: wait %s; want %s (to the window's end)", now.Sub(start), d, want)
					}
				case err != nil:
					t.Fatalf("at +%s (after the window): %v", now.Sub(start), err)
				}
				if i == 1 {
					// The reviewer is another account: not held back.
					if _, err := replicas[0].Reviewer(t.Context(), 0); err != nil {
						t.Errorf("the reviewer account was held back by the robot's wait: %v", err)
					}
				}
				clock.Advance(5 * time.Second)
			}
			var during, after int
			for _, c := range srv.Calls() {
				switch {
				case c.User != "changebot":
				case c.ClockAt.Before(end):
					during++
					if c.Status != http.StatusTooManyRequests {
						t.Errorf("call at +%s answered %d during the window", c.ClockAt.Sub(start), c.Status)
					}
				default:
					after++
				}
			}
			if during != 1 {
				t.Errorf("%d requests reached GitLab during the window; want 1 (the one answered 429)", during)
			}
			if after == 0 {
				t.Error("no request after the window")
			}
		})
	}
}

// TestHeldCallWaitsTheRest: a call held back by the account's wait asks
// its job to wait the rest of the wait, not a round second (at least
// 100 ms), so that held jobs send again as soon as GitLab allows.
func TestHeldCallWaitsTheRest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		left, want time.Duration
	}{
		{name: "a few seconds left", left: 2500 * time.Millisecond, want: 2500 * time.Millisecond},
		{name: "under a second left", left: 300 * time.Millisecond, want: 300 * time.Millisecond},
		{name: "about to end", left: 20 * time.Millisecond, want: 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := &testClock{now: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
			srv := gitlabfake.New(gitlabfake.Options{NowFunc: clock.Now})
			t.Cleanup(srv.Close)
			srv.AddUser("changebot", robotToken, gitlabfake.AsBot())
			proj := srv.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "group/config",
				Members: map[string]int{"changebot": gitlabfake.AccessMaintainer}})
			waits := &waitsTable{until: map[string]time.Time{}}
			c, err := gitlab.New(gitlab.Config{BaseURL: srv.URL(), Token: robotToken, AccountWaits: waits, NowFunc: clock.Now,
				RetryMax: -1})
			if err != nil {
				t.Fatal(err)
			}
			srv.InjectRateLimit(gitlabfake.RateLimit{User: "changebot", Until: clock.Now().Add(time.Minute),
				Headers: gitlabfake.RateLimitRetryAfterSeconds})
			if _, err := c.Project(t.Context(), proj.PathWithNamespace); platform.StatusOf(err) != http.StatusTooManyRequests {
				t.Fatalf("first call: %v; want the 429", err)
			}
			// Later, tt.left of the account's wait is left.
			for account := range waits.until {
				waits.until[account] = clock.Now().Add(tt.left)
			}
			_, err = c.Project(t.Context(), proj.PathWithNamespace)
			if d, ok := platform.RateLimitWait(err); !ok || d != tt.want {
				t.Fatalf("held call: wait %s (%v); want %s", d, err, tt.want)
			}
			if n := srv.CallCount("", "/api/v4/projects/*"); n != 1 {
				t.Fatalf("%d calls reached GitLab; want only the first", n)
			}
		})
	}
}
