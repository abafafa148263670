package flowtest_test

import (
	"slices"
	"strings"
	"testing"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/store"
)

// TestHappyPathApprovalFirst drives a change to VALIDATED in the default
// order (DESIGN §3) with jobs, delivered webhooks and the clock only.
func TestHappyPathApprovalFirst(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.Submit(t, flowtest.Change("payments-api"))
	h.RequireStep(t, op.ID, rules.ApprovalSending)

	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.ApprovalSent)
	if res := h.Decide(t, op.ID, rules.DecisionApproved); res != rules.ResultAccepted {
		t.Fatalf("approval callback: %s", res)
	}
	h.RequireStep(t, op.ID, rules.CreateStarted)

	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.CreateMROpened)
	hooks := h.DeliverWebhooks(t)
	if len(hooks) == 0 {
		t.Fatal("the fake GitLab sent no webhook after the MR was opened")
	}
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.HandleMerged)
	if mr := h.MR(t, op.ID); mr.State != "merged" {
		t.Fatalf("MR state %s, want merged", mr.State)
	}

	h.DeliverWebhooks(t) // the deploy pipeline on main
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.CalledBack)
	if b := h.Binding(t, op.ID); b.Status != "VALIDATED" || b.OperationID != op.ID {
		t.Fatalf("binding %+v, want VALIDATED owned by %s", b, op.ID)
	}
	want := []rules.StepCode{rules.ApprovalSending, rules.ApprovalSent, rules.CreateStarted, rules.CreateMROpened,
		rules.CreateSucceeded, rules.HandleStarted, rules.HandleApproved, rules.HandleMerged, rules.CalledBack}
	if got := h.Steps(t, op.ID); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	if !h.Clock.Now().Equal(flowtest.Start) {
		t.Fatalf("the clock moved by itself to %s", h.Clock.Now())
	}
}

// TestHappyPathMRFirst drives the older order: MR and pipeline first, then
// the approval request carrying the MR, then handle and deploy.
func TestHappyPathMRFirst(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	p := flowtest.Change("orders-api")
	p.ApprovalFirst = false
	op := h.Submit(t, p)
	h.RequireStep(t, op.ID, rules.CreateStarted)

	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.CreateMROpened)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.ApprovalSent)
	reqs := h.Approvals.Requests()
	if len(reqs) != 1 || reqs[0].Ext["mr_iid"] == nil {
		t.Fatalf("approval requests %+v, want one carrying the MR iid", reqs)
	}
	if res := h.Decide(t, op.ID, rules.DecisionApproved); res != rules.ResultAccepted {
		t.Fatalf("approval callback: %s", res)
	}
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.HandleMerged)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.CalledBack)
}

// TestPollingWithoutWebhooks: with every webhook lost, the waits' polls
// carry the change to VALIDATED as the clock advances.
func TestPollingWithoutWebhooks(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.Submit(t, flowtest.Change("ledger"))
	h.WorkUntilIdle(t)
	h.Decide(t, op.ID, rules.DecisionApproved)
	h.WorkUntilIdle(t)
	h.TakeWebhooks(t) // lost
	h.RequireStep(t, op.ID, rules.CreateMROpened)
	if w := h.WorkUntilIdle(t); len(w) != 0 {
		t.Fatalf("jobs ran before the poll was due: %v", w)
	}

	h.Advance(flowtest.Poll.ShortInterval)
	h.WorkUntilIdle(t)
	h.TakeWebhooks(t)
	h.RequireStep(t, op.ID, rules.HandleMerged)

	h.Advance(flowtest.Poll.ShortInterval)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.CalledBack)
}

// TestHappyPathOnGitHub is TestHappyPathApprovalFirst on githubfake (issue
// 21 point 14): Opts.Platform github builds the GitHub adapter, the
// engine's webhooks are GitHub's (decoded as GitHub's), and the pull
// request is merged with both reviewers' approving reviews; no GitLab
// exists in the harness.
func TestHappyPathOnGitHub(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, &flowtest.Opts{Platform: store.PlatformGitHub})
	if h.GitLab != nil || h.Client != nil {
		t.Fatal("a GitHub harness built a GitLab")
	}
	op := h.ToMROpened(t, flowtest.Change("payments-api"))
	if op.Platform != store.PlatformGitHub {
		t.Fatalf("operation platform %q, want github", op.Platform)
	}
	hooks := h.DeliverWebhooks(t)
	if len(hooks) == 0 || hooks[0].Event != strings.ToLower(hooks[0].Event) {
		t.Fatalf("webhooks after the pull request opened: %s", flowtest.Describe(hooks))
	}
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.HandleMerged)
	pr := h.PR(t, op.ID)
	if !pr.Merged || len(pr.Approvals) != 2 {
		t.Fatalf("pull request %+v, want merged with two approvals", pr)
	}
	if n := h.GitHub.CallCount("PUT", "/repos/*/*/pulls/*/merge"); n != 1 {
		t.Errorf("merge calls = %d, want 1", n)
	}
	h.DeliverWebhooks(t) // the deploy run on main
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.CalledBack)
}
