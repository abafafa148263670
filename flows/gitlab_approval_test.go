package flows_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

// gitlabApprovalHarness is a harness whose project is approved in GitLab
// by carol and alice (the requester), one approval required. It records
// the change as the request-approval job saw it when it started at
// APPROVAL_SENDING (what an approval read at that moment sees).
func gitlabApprovalHarness(t *testing.T) (*flowtest.Harness, func() store.Operation) {
	t.Helper()
	var h *flowtest.Harness
	var mu sync.Mutex
	var sending store.Operation
	h = flowtest.New(t, &flowtest.Opts{Configure: func(cfg *flows.EngineConfig) {
		cfg.ApprovalPolicyFunc = func(string) flows.ApprovalPolicy {
			return flows.ApprovalPolicy{Provider: rules.ProviderGitLab, Approvers: []string{"carol", flowtest.Requester}, Required: 1}
		}
		cfg.StepHookFunc = func(kind string) {
			if kind != rules.KindRequestApproval {
				return
			}
			ops, err := h.Store.ListOperationsByStatus(context.Background(), h.Store.DB(), []string{store.StatusApprovalSending},
				flowtest.Start.AddDate(-1, 0, 0), flowtest.Start.AddDate(1, 0, 0), 10)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && len(ops) == 1 && sending.ID == "" {
				sending = ops[0]
			}
		}
	}})
	h.GitLab.AddUser("carol", "carol-token")
	return h, func() store.Operation {
		mu.Lock()
		defer mu.Unlock()
		return sending
	}
}

// toApprovalSent drives a change (MR first, as in-GitLab approval implies)
// to APPROVAL_SENT and returns it as it was at APPROVAL_SENDING.
func toApprovalSent(t *testing.T, h *flowtest.Harness, sendingOp func() store.Operation) (store.Operation, store.Operation) {
	t.Helper()
	p := flowtest.Change("svc")
	p.ApprovalFirst = false
	op := h.ToMROpened(t, p)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.ApprovalSent)
	stale := sendingOp()
	if rules.StepCode(stale.Step) != rules.ApprovalSending || stale.MRIID == 0 {
		t.Fatalf("the change was not seen at APPROVAL_SENDING with its MR: %+v", stale)
	}
	return op, stale
}

// TestGitLabApprovalReadWhileSendingCounts (issue 9, defect 9): an
// approval read while the change was still APPROVAL_SENDING, and recorded
// after the request job wrote SENT and counted, still moves the change.
func TestGitLabApprovalReadWhileSendingCounts(t *testing.T) {
	t.Parallel()
	h, sendingOp := gitlabApprovalHarness(t)
	op, stale := toApprovalSent(t, h, sendingOp)
	ctx := context.Background()
	if err := h.Engine.DecideInGitLab(ctx, stale, platform.User{Username: "carol"}, rules.GitLabApprove, "test"); err != nil {
		t.Fatalf("carol's approval: %v", err)
	}
	h.RequireStep(t, op.ID, rules.HandleStarted)
}

// TestGitLabApprovalRequesterNeverCounts (issue 9, defect 9): the
// requester's own approval is refused, even when the requester is one of
// the approvers, and the change keeps waiting.
func TestGitLabApprovalRequesterNeverCounts(t *testing.T) {
	t.Parallel()
	h, sendingOp := gitlabApprovalHarness(t)
	op, _ := toApprovalSent(t, h, sendingOp)
	ctx := context.Background()
	err := h.Engine.DecideInGitLab(ctx, h.Op(t, op.ID), platform.User{Username: flowtest.Requester}, rules.GitLabApprove, "test")
	if !errors.Is(err, rules.ErrNotApplicable) || !strings.Contains(err.Error(), "requested") {
		t.Fatalf("the requester's approval: %v, want not applicable, saying they requested the change", err)
	}
	h.RequireStep(t, op.ID, rules.ApprovalSent)
	if err := h.Engine.DecideInGitLab(ctx, h.Op(t, op.ID), platform.User{Username: "carol"}, rules.GitLabApprove, "test"); err != nil {
		t.Fatal(err)
	}
	h.RequireStep(t, op.ID, rules.HandleStarted)
}
