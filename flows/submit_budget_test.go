package flows_test

import (
	"strings"
	"testing"
	"time"

	"changebot/budget"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/store"
)

// TestSubmitNeverWaitsOnTheCallBudget (issue 22 point 1): with the call
// budget spent, a submit is still taken at once (a burst of submits is
// not refused with 503 because the budget holds the checks back); the
// checks it could not make run in the change's first job once the budget
// has calls again, and a change that does not fit ends in CREATE_REFUSED
// with the reasons a 422 gives, nothing sent to the approver, its binding
// free. Before, the submit answered 503 while the budget was spent.
func TestSubmitNeverWaitsOnTheCallBudget(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	h.SetBudget(budget.Limits{PerMinute: 60, Burst: 250, Reserve: 30})
	h.DrainBudget(t, 0)
	ok := h.Submit(t, flowtest.Change("svc-ok"))
	badParams := flowtest.Change("svc-bad")
	badParams.TargetBranch = "no-such-branch"
	bad := h.Submit(t, badParams)
	for _, op := range []store.Operation{ok, bad} {
		if rules.StepCode(op.Step) != rules.ApprovalSending {
			t.Fatalf("%s submitted at %s, want APPROVAL_SENDING", op.ID, rules.StepCode(op.Step))
		}
		if ev := h.Events(t, op.ID)[0]; !strings.Contains(strings.ReplaceAll(string(ev.Payload), " ", ""), `"checks_deferred":true`) {
			t.Errorf("submitted event %s does not say the checks were deferred", ev.Payload)
		}
	}
	h.Advance(time.Minute) // the budget has calls again
	h.WorkUntilIdle(t)
	h.RequireStep(t, ok.ID, rules.ApprovalSent)
	got := h.RequireStep(t, bad.ID, rules.CreateRefused)
	if !strings.Contains(got.Detail, `target_branch: branch "no-such-branch" not found`) {
		t.Errorf("detail %q, want the submit's 422 reason for target_branch", got.Detail)
	}
	if b := h.Binding(t, bad.ID); b.Status != store.StatusClosed {
		t.Errorf("binding of the refused change is %s, want CLOSED (free)", b.Status)
	}
	if got.TicketID != "" {
		t.Errorf("the refused change was sent to the approver (ticket %s)", got.TicketID)
	}
	// The same change submitted again, with the budget available, is
	// refused at once with the same reason (422).
	_, _, err := h.Engine.Submit(t.Context(), badParams)
	if err == nil || !strings.Contains(err.Error(), `branch "no-such-branch" not found`) {
		t.Errorf("submitting again: %v, want the 422 naming the branch", err)
	}
}
