package flows_test

import (
	"testing"
	"time"

	"changebot/budget"
	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
)

// mrGets counts GitLab's answers to single merge request reads.
func mrGets(h *flowtest.Harness) int {
	return h.GitLab.CallCount("GET", "/api/v4/projects/*/merge_requests/*")
}

// TestBudgetPriority (issue 12 point 4): when the robot's call budget
// holds no more than its reserve, the poll of a waiting change yields (no
// GitLab call, no event, snoozed until the budget refills), while a /retry
// on another change is acted on at once: its job's calls use the reserve.
// With a budget above the reserve the poll reads the merge request.
func TestBudgetPriority(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		left      float64 // calls in the budget when the poll is due
		wantPolls int     // MR reads of the due poll
	}{
		{name: "budget at its reserve: the poll yields", left: 20, wantPolls: 0},
		{name: "budget above its reserve: the poll reads the MR", left: 200, wantPolls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, nil)
			// The first MR pipeline fails (change A), the second runs
			// forever (change B waits on it), the retried one passes.
			h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed", "running", "success"}})
			a := h.Submit(t, flowtest.Change("payments-api"))
			h.WorkUntilIdle(t)
			h.Decide(t, a.ID, rules.DecisionApproved)
			h.WorkUntilIdle(t)
			h.DeliverWebhooks(t)
			h.WorkUntilIdle(t)
			a = h.RequireStep(t, a.ID, rules.CreatePipelineFailed)

			b := h.Submit(t, flowtest.Change("orders-api"))
			h.WorkUntilIdle(t)
			h.Decide(t, b.ID, rules.DecisionApproved)
			h.WorkUntilIdle(t)
			h.DeliverWebhooks(t)
			h.WorkUntilIdle(t)
			b = h.RequireStep(t, b.ID, rules.CreateMROpened)

			// 1 call a minute flows back: nothing refills during the test.
			h.SetBudget(budget.Limits{PerMinute: 1, Burst: 250, Reserve: 30})
			h.DrainBudget(t, tt.left)
			events := len(h.Events(t, b.ID))
			before := mrGets(h)
			h.Advance(flowtest.Poll.ShortInterval)
			h.WorkUntilIdle(t)
			if got := mrGets(h) - before; got != tt.wantPolls {
				t.Fatalf("the due poll read the merge request %d times, want %d", got, tt.wantPolls)
			}
			if got := len(h.Events(t, b.ID)); got != events {
				t.Fatalf("the poll wrote %d events, want none", got-events)
			}
			h.RequireStep(t, b.ID, rules.CreateMROpened)
			if jobs := h.Jobs(t, rules.KindAwaitPipeline); len(jobs) != 1 {
				t.Fatalf("the waiting change has %d poll jobs, want 1", len(jobs))
			}

			pipelines := h.GitLab.CallCount("POST", "/api/v4/projects/*/merge_requests/*/pipelines")
			if _, err := h.Engine.Retry(t.Context(), a, rules.ActionParams{Actor: "alice", Source: "test", Command: "retry"}); err != nil {
				t.Fatalf("/retry: %v", err)
			}
			h.WorkUntilIdle(t) // no time passes: the budget does not refill
			if got := h.GitLab.CallCount("POST", "/api/v4/projects/*/merge_requests/*/pipelines") - pipelines; got != 1 {
				t.Fatalf("/retry started %d new pipelines, want 1 (its calls may use the reserve)", got)
			}
			if got := h.Op(t, a.ID); rules.StepCode(got.Step) != rules.CreateMROpened {
				t.Fatalf("after /retry change A is at %s, want %s", rules.StepCode(got.Step), rules.CreateMROpened)
			}
		})
	}
}

// TestOnePollPerInterval (issue 12 point 4): a change waiting on a
// pipeline that never reports, with the reconciler passing every minute,
// reads its merge request once per poll interval: the reconciler wakes
// only polls due later than reconcile.quiet_after, never one on its
// normal schedule.
func TestOnePollPerInterval(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"running"}})
	op := h.Submit(t, flowtest.Change("payments-api"))
	h.WorkUntilIdle(t)
	h.Decide(t, op.ID, rules.DecisionApproved)
	h.WorkUntilIdle(t)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.CreateMROpened)
	p := flowtest.Poll
	// Past the short polls: from here on one poll per long interval.
	h.RunFor(t, time.Duration(p.ShortCount+1)*p.ShortInterval)
	before := mrGets(h)
	const rounds = 10
	for range rounds {
		for range int(p.LongInterval / time.Minute) {
			h.Advance(time.Minute)
			if _, err := flows.NewReconciler(h.Engine, h.Store, flows.ReconcileConfig{}).Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			h.WorkUntilIdle(t)
		}
	}
	// Exactly one an interval, give or take the interval the window starts
	// in: polling that stopped (0 reads) fails as polling twice does.
	if got := mrGets(h) - before; got < rounds-1 || got > rounds {
		t.Fatalf("%d merge request reads in %d poll intervals, want one per interval (%d or %d)", got, rounds, rounds-1, rounds)
	}
	h.RequireStep(t, op.ID, rules.CreateMROpened)
}

// TestWebhookPostponesPoll (issue 12 point 4): while pipeline webhooks for
// a waiting change's merge request arrive, its poll waits: a webhook
// pushes the next poll out by the poll interval from its arrival, so a
// poll due 5 s after it is not due then, and is one interval later.
func TestWebhookPostponesPoll(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"running"}})
	op := h.Submit(t, flowtest.Change("payments-api"))
	h.WorkUntilIdle(t)
	h.Decide(t, op.ID, rules.DecisionApproved)
	h.WorkUntilIdle(t)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	op = h.RequireStep(t, op.ID, rules.CreateMROpened)
	polls := h.Jobs(t, rules.KindAwaitPipeline)
	if len(polls) != 1 {
		t.Fatalf("the waiting change has %d poll jobs, want 1", len(polls))
	}
	next := polls[0].ScheduledAt.Sub(h.Now())
	if next <= 5*time.Second {
		t.Fatalf("the poll is due in %s; the test needs more than 5 s", next)
	}
	// A new pipeline of the MR starts shortly before the poll is due: its
	// running webhook arrives.
	h.Advance(next - 5*time.Second)
	if _, err := h.ClientAs(t, flowtest.Requester).CreateMergeRequestPipeline(t.Context(), h.Project.ID, op.MRIID); err != nil {
		t.Fatal(err)
	}
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	before := mrGets(h)
	h.Advance(5 * time.Second) // when the poll was due
	h.WorkUntilIdle(t)
	if got := mrGets(h) - before; got != 0 {
		t.Fatalf("the poll read the merge request %d times right after a webhook, want 0", got)
	}
	h.Advance(flowtest.Poll.ShortInterval)
	h.WorkUntilIdle(t)
	if got := mrGets(h) - before; got != 1 {
		t.Fatalf("one interval after the webhook the poll read the merge request %d times, want 1", got)
	}
	h.RequireStep(t, op.ID, rules.CreateMROpened)
}
