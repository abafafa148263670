package gitlab_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
)

// bucket is an in-memory CallBudget: tokens calls, background calls leave
// reserve; it records what GitLab said was left.
type bucket struct {
	mu        sync.Mutex
	tokens    float64
	reserve   float64
	remaining []int
}

func (b *bucket) TakeCall(_ context.Context, _ string, p platform.Priority) (time.Duration, float64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := 0.0
	if p == platform.PriorityBackground {
		keep = b.reserve
	}
	if b.tokens < keep+1 {
		return 3 * time.Second, b.tokens, nil
	}
	b.tokens--
	return 0, b.tokens, nil
}

func (b *bucket) RemainingCalls(_ context.Context, _ string, remaining int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.remaining = append(b.remaining, remaining)
	b.tokens = min(b.tokens, float64(remaining))
	return nil
}

// TestCallBudget (issue 12 point 4): every request takes from the
// account's budget; a background call the budget refuses is not sent and
// fails as a rate limit marked Budget and NotSent with the budget's wait,
// while a call at person priority is sent; GitLab's RateLimit-Remaining
// below what the budget holds lowers the budget, and is not written when
// the budget holds less.
func TestCallBudget(t *testing.T) {
	t.Parallel()
	srv := gitlabfake.New(gitlabfake.Options{})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken, gitlabfake.AsBot())
	proj := srv.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "group/config",
		Members: map[string]int{"changebot": gitlabfake.AccessMaintainer}})
	srv.SetRequestLimit(gitlabfake.RequestLimit{PerWindow: 2000, Window: time.Hour})
	b := &bucket{tokens: 5000, reserve: 1997}
	c, err := gitlab.New(gitlab.Config{BaseURL: srv.URL(), Token: robotToken, Budget: b, RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	bg := platform.WithPriority(t.Context(), platform.PriorityBackground)

	// GitLab allows 2,000, the budget holds 5,000: the first answer (1,999
	// left) lowers the budget to 1,999.
	if _, err := c.Project(bg, proj.PathWithNamespace); err != nil {
		t.Fatal(err)
	}
	if len(b.remaining) != 1 || b.remaining[0] != 1999 || b.tokens != 1999 {
		t.Fatalf("after the first answer: remaining recorded %v, budget %v; want [1999] and 1999", b.remaining, b.tokens)
	}
	// 1,998 left in the budget after this take and in GitLab: nothing written.
	if _, err := c.Project(bg, proj.PathWithNamespace); err != nil {
		t.Fatal(err)
	}
	if len(b.remaining) != 1 {
		t.Fatalf("RateLimit-Remaining equal to the budget was written: %v", b.remaining)
	}
	if _, err := c.Project(bg, proj.PathWithNamespace); err != nil {
		t.Fatal(err)
	}
	// The budget holds 1,997 after the third call, its reserve: the
	// background call is held.
	sent := len(srv.Calls())
	_, err = c.Project(bg, proj.PathWithNamespace)
	var pe *platform.Error
	if !platform.IsBudgetHold(err) || !errors.Is(err, platform.ErrRateLimited) || !errors.As(err, &pe) || !pe.NotSent || pe.RetryAfter > 3*time.Second || pe.RetryAfter < 2*time.Second {
		t.Fatalf("a background call at the reserve: %v (%+v); want a budget hold of 3s, not sent", err, pe)
	}
	if len(srv.Calls()) != sent {
		t.Fatal("the held background call reached GitLab")
	}
	// A person's call uses the reserve.
	if _, err := c.Project(t.Context(), proj.PathWithNamespace); err != nil {
		t.Fatalf("a person's call at the reserve: %v", err)
	}
	if srv.RateLimited() != 0 {
		t.Fatalf("GitLab answered %d calls 429", srv.RateLimited())
	}
	for _, call := range srv.Calls() {
		if call.Status == http.StatusTooManyRequests {
			t.Fatalf("a call was answered 429: %+v", call)
		}
	}
}

// TestNoClientGoLimiter: client-go's own rate limiter stays off whatever
// RateLimit-Limit GitLab answers. Left on, it sizes itself from the first
// answer's RateLimit-Limit (6 a minute here: one call every 15 s after the
// first) and holds the next call; that call's context ends in 10 s, so
// client-go would refuse it at once ("would exceed context deadline").
// The call budget and the account's 429 waits are what pace calls.
func TestNoClientGoLimiter(t *testing.T) {
	t.Parallel()
	srv := gitlabfake.New(gitlabfake.Options{})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken, gitlabfake.AsBot())
	proj := srv.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "group/config",
		Members: map[string]int{"changebot": gitlabfake.AccessMaintainer}})
	srv.SetRequestLimit(gitlabfake.RequestLimit{PerWindow: 6, Window: time.Hour})
	c, err := gitlab.New(gitlab.Config{BaseURL: srv.URL(), Token: robotToken, RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, err := c.Project(ctx, proj.PathWithNamespace)
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	if n := srv.CallCount(http.MethodGet, "/api/v4/projects/*"); n != 3 {
		t.Errorf("GitLab saw %d calls; want 3", n)
	}
}

// scriptedBudget answers TakeCall with waits in turn (0: granted), then
// grants every call; it counts the takes.
type scriptedBudget struct {
	mu    sync.Mutex
	waits []time.Duration
	takes int
}

func (b *scriptedBudget) TakeCall(context.Context, string, platform.Priority) (time.Duration, float64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.takes++
	if len(b.waits) == 0 {
		return 0, 100, nil
	}
	w := b.waits[0]
	b.waits = b.waits[1:]
	return w, 0, nil
}

func (b *scriptedBudget) RemainingCalls(context.Context, string, int) error { return nil }

// TestPersonCallWaitsForTheBudget (issue 12 point 4): a call a person waits
// on waits in the client while the budget's waits add up to no more than
// PersonBudgetWait, then is sent once, so that a step's calls are not cut
// short and its job run again from the start; a wait beyond that, and any
// wait of a background call, holds the call back unsent at once.
func TestPersonCallWaitsForTheBudget(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name       string
		priority   platform.Priority
		waits      []time.Duration
		wantSlept  []time.Duration
		wantHeld   bool
		wantTakes  int
		wantCalled bool
		deadline   time.Duration // the call's context ends this long after it starts (0: no deadline)
	}{
		{name: "person, short waits", priority: platform.PriorityPerson, waits: []time.Duration{100 * ms, 40 * ms},
			wantSlept: []time.Duration{100 * ms, 40 * ms}, wantTakes: 3, wantCalled: true},
		{name: "person, granted at once", priority: platform.PriorityPerson, wantTakes: 1, wantCalled: true},
		{name: "person, waits past the limit", priority: platform.PriorityPerson, waits: []time.Duration{1500 * ms, 1000 * ms},
			wantSlept: []time.Duration{1500 * ms}, wantHeld: true, wantTakes: 2},
		{name: "person, a 429 wait", priority: platform.PriorityPerson, waits: []time.Duration{30 * time.Second},
			wantHeld: true, wantTakes: 1},
		{name: "background never waits", priority: platform.PriorityBackground, waits: []time.Duration{40 * ms},
			wantHeld: true, wantTakes: 1},
		{name: "person, the wait would eat the job's time", priority: platform.PriorityPerson, waits: []time.Duration{900 * ms},
			deadline: time.Second, wantHeld: true, wantTakes: 1},
		{name: "person, the job has time for the wait", priority: platform.PriorityPerson, waits: []time.Duration{100 * ms},
			deadline: time.Minute, wantSlept: []time.Duration{100 * ms}, wantTakes: 2, wantCalled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := gitlabfake.New(gitlabfake.Options{})
			t.Cleanup(srv.Close)
			srv.AddUser("changebot", robotToken, gitlabfake.AsBot())
			proj := srv.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "group/config",
				Members: map[string]int{"changebot": gitlabfake.AccessMaintainer}})
			b := &scriptedBudget{waits: tt.waits}
			var slept []time.Duration
			c, err := gitlab.New(gitlab.Config{BaseURL: srv.URL(), Token: robotToken, Budget: b, RetryMax: -1,
				SleepFunc: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }})
			if err != nil {
				t.Fatal(err)
			}
			ctx := platform.WithPriority(t.Context(), tt.priority)
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			_, err = c.Project(ctx, proj.PathWithNamespace)
			if held := platform.IsBudgetHold(err); held != tt.wantHeld || (!tt.wantHeld && err != nil) {
				t.Fatalf("err = %v (a budget hold: %v); want held %v", err, held, tt.wantHeld)
			}
			if !slices.Equal(slept, tt.wantSlept) {
				t.Errorf("slept %v; want %v", slept, tt.wantSlept)
			}
			if b.takes != tt.wantTakes {
				t.Errorf("%d takes; want %d", b.takes, tt.wantTakes)
			}
			if called := len(srv.Calls()) > 0; called != tt.wantCalled {
				t.Errorf("GitLab called: %v; want %v", called, tt.wantCalled)
			}
		})
	}
}
