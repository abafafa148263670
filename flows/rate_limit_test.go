package flows_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// TestRateLimitWindowDuringPipelineWait is issue 10 point 4 with the
// issue's input: during the pipeline wait every request with the robot's
// token answers 429 for 60 s (RateLimit-Limit 2000, RateLimit-Remaining 0,
// RateLimit-Reset the window's end as a Unix time, RateLimit-ResetTime as
// an HTTP date, no Retry-After; GitLab's "requested too many times" body),
// and the same with Retry-After in seconds, as an HTTP date, and with no
// header at all. The pipeline's webhooks arrive inside the window. The robot
// sends one request in the window (the one answered 429) and the next only
// at its end, the webhooks are stored at once, the pipeline's success is
// taken on its webhook's word without a call (pipelineHookTrusted) and the
// approve step's read of the merge request waits out the window, no job
// fails and no failure step is written, and the change reaches VALIDATED
// after the window.
func TestRateLimitWindowDuringPipelineWait(t *testing.T) {
	t.Parallel()
	for _, headers := range []gitlabfake.RateLimitHeaders{gitlabfake.RateLimitResetHeaders,
		gitlabfake.RateLimitRetryAfterSeconds, gitlabfake.RateLimitRetryAfterDate, gitlabfake.RateLimitNoHeaders} {
		t.Run(string(headers), func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, nil)
			op := h.ToMROpened(t, flowtest.Change("svc"))
			start, before := h.Now(), len(h.GitLab.Calls())
			end := start.Add(60 * time.Second)
			h.GitLab.InjectRateLimit(gitlabfake.RateLimit{User: flowtest.Robot, Until: end, Headers: headers})

			// The MR pipeline's webhooks arrive during the window: stored
			// at once (the intake's 2xx), applied later.
			hooks := h.TakeWebhooks(t)
			if len(hooks) == 0 {
				t.Fatal("no pipeline webhook to deliver")
			}
			for i, fresh := range h.Deliver(t, hooks...) {
				if !fresh {
					t.Fatalf("webhook %d was not stored", i)
				}
			}
			worked := h.WorkUntilIdle(t) // the first robot request meets the 429

			// Another replica (its own adapter on the same database)
			// respects the account's wait: its call is not sent.
			other, err := gitlab.New(gitlab.Config{BaseURL: h.GitLab.URL(), Token: "robot-token", RetryMax: -1,
				NowFunc: h.Clock.Now, AccountWaits: h.Store})
			if err != nil {
				t.Fatal(err)
			}
			sent := len(h.GitLab.Calls())
			h.Advance(30 * time.Second)
			_, err = other.MergeRequest(context.Background(), op.ProjectID, op.MRIID, false)
			if d, ok := platform.RateLimitWait(err); !ok || d != 30*time.Second {
				t.Fatalf("the other replica's call: %v; want rate limited for the 30 s left", err)
			}
			if n := len(h.GitLab.Calls()); n != sent {
				t.Fatalf("the other replica sent %d requests during the window", n-sent)
			}
			worked = append(worked, h.RunFor(t, end.Sub(h.Now())-time.Second)...)
			for _, w := range worked {
				if w.Event != "job_snoozed" && w.Event != "job_completed" {
					t.Errorf("during the window: %s", w)
				}
			}
			h.RequireStep(t, op.ID, rules.HandleStarted)

			// After the window: applied, merged, deployed.
			h.RunFor(t, 2*time.Minute)
			h.DeliverWebhooks(t) // the deploy pipeline on main, if its poll has not seen it
			h.WorkUntilIdle(t)
			h.RequireStep(t, op.ID, rules.CalledBack)
			if b := h.Binding(t, op.ID); b.Status != store.StatusValidated {
				t.Fatalf("binding %s, want VALIDATED", b.Status)
			}
			if n := unprocessed(t, h); n != 0 {
				t.Fatalf("%d webhooks never applied", n)
			}

			var inWindow []gitlabfake.Call
			var firstAfter time.Time
			for _, c := range h.GitLab.Calls()[before:] {
				if c.User != flowtest.Robot {
					continue
				}
				if c.ClockAt.Before(end) {
					inWindow = append(inWindow, c)
				} else if firstAfter.IsZero() {
					firstAfter = c.ClockAt
				}
			}
			if len(inWindow) != 1 || inWindow[0].Status != http.StatusTooManyRequests {
				for _, c := range inWindow {
					t.Logf("+%s %s %s -> %d", c.ClockAt.Sub(start), c.Method, c.Path, c.Status)
				}
				t.Fatalf("the robot sent %d requests in the 60 s window; want one, answered 429", len(inWindow))
			}
			if !firstAfter.Equal(end) {
				t.Errorf("first request after the window at +%s; want at its end, +60s", firstAfter.Sub(start))
			}
			for _, s := range h.Steps(t, op.ID) {
				if st, ok := rules.Lookup(s); ok && st.Terminal && s != rules.CalledBack {
					t.Errorf("the change passed through %s", s)
				}
			}
		})
	}
}

// unprocessed counts stored webhook deliveries not yet applied.
func unprocessed(t *testing.T, h *flowtest.Harness) int {
	t.Helper()
	h.RequirePostgres(t, "counts unprocessed deliveries through the PostgreSQL pool (h.Schema.Pool)")
	var n int
	if err := h.Schema.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM webhook_deliveries WHERE processed_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
