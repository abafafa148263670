package flowtest_test

import (
	"slices"
	"testing"

	"changebot/flows"
	"changebot/flows/flowtest"
)

// TestHappyPathApprovalFirst drives a change to VALIDATED in the default
// order (DESIGN §3) with jobs, delivered webhooks and the clock only.
func TestHappyPathApprovalFirst(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.Submit(t, flowtest.Change("payments-api"))
	h.RequireStep(t, op.ID, flows.ApprovalSending)

	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, flows.ApprovalSent)
	if res := h.Decide(t, op.ID, flows.DecisionApproved); res != flows.ResultAccepted {
		t.Fatalf("approval callback: %s", res)
	}
	h.RequireStep(t, op.ID, flows.CreateStarted)

	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, flows.CreateMROpened)
	hooks := h.DeliverWebhooks(t)
	if len(hooks) == 0 {
		t.Fatal("the fake GitLab sent no webhook after the MR was opened")
	}
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, flows.HandleMerged)
	if mr := h.MR(t, op.ID); mr.State != "merged" {
		t.Fatalf("MR state %s, want merged", mr.State)
	}

	h.DeliverWebhooks(t) // the deploy pipeline on main
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, flows.CalledBack)
	if b := h.Binding(t, op.ID); b.Status != "VALIDATED" || b.OperationID != op.ID {
		t.Fatalf("binding %+v, want VALIDATED owned by %s", b, op.ID)
	}
	want := []flows.StepCode{flows.ApprovalSending, flows.ApprovalSent, flows.CreateStarted, flows.CreateMROpened,
		flows.CreateSucceeded, flows.HandleStarted, flows.HandleApproved, flows.HandleMerged, flows.CalledBack}
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
	h.RequireStep(t, op.ID, flows.CreateStarted)

	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, flows.CreateMROpened)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, flows.ApprovalSent)
	reqs := h.Approvals.Requests()
	if len(reqs) != 1 || reqs[0].Ext["mr_iid"] == nil {
		t.Fatalf("approval requests %+v, want one carrying the MR iid", reqs)
	}
	if res := h.Decide(t, op.ID, flows.DecisionApproved); res != flows.ResultAccepted {
		t.Fatalf("approval callback: %s", res)
	}
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, flows.HandleMerged)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, flows.CalledBack)
}

// TestPollingWithoutWebhooks: with every webhook lost, the waits' polls
// carry the change to VALIDATED as the clock advances.
func TestPollingWithoutWebhooks(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.Submit(t, flowtest.Change("ledger"))
	h.WorkUntilIdle(t)
	h.Decide(t, op.ID, flows.DecisionApproved)
	h.WorkUntilIdle(t)
	h.TakeWebhooks(t) // lost
	h.RequireStep(t, op.ID, flows.CreateMROpened)
	if w := h.WorkUntilIdle(t); len(w) != 0 {
		t.Fatalf("jobs ran before the poll was due: %v", w)
	}

	h.Advance(flowtest.Poll.ShortInterval)
	h.WorkUntilIdle(t)
	h.TakeWebhooks(t)
	h.RequireStep(t, op.ID, flows.HandleMerged)

	h.Advance(flowtest.Poll.ShortInterval)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, flows.CalledBack)
}
