package flows_test

import (
	"context"
	"testing"

	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
)

// TestCallbackDedupePerKind (issue 9, defect 10): approval and deploy
// callbacks are deduplicated per kind, so a deploy callback whose request
// id an approval callback used before is applied, not answered DUPLICATE.
func TestCallbackDedupePerKind(t *testing.T) {
	t.Parallel()
	s := newDeploySetup(t)
	ctx := context.Background()
	s.fake.SetPipelineScript(s.project.ID, gitlabfake.PipelineScript{Deploy: []string{"canceled"}})
	waiting := submit(t, s.setup, "approve-me")
	merged := s.merged(t, "deploy-me", 7, s.push(t))
	s.idle(t)
	if res, err := s.engine.AcceptApproval(ctx, rules.ApprovalCallback{RequestID: "42", OperationID: waiting.ID,
		Decision: rules.DecisionApproved, Approver: "carol"}); err != nil || res != rules.ResultAccepted {
		t.Fatalf("approval callback 42: %s %v, want ACCEPTED", res, err)
	}
	res, err := s.engine.AcceptDeploy(ctx, rules.DeployCallback{RequestID: "42", ProjectID: s.project.ID, MRIID: 7, Status: "success"})
	if err != nil || res != rules.ResultAccepted {
		t.Fatalf("deploy callback 42 after approval callback 42: %s %v, want ACCEPTED", res, err)
	}
	if st := s.step(t, merged); st != rules.CalledBack {
		t.Fatalf("merged change at %s, want CALLED_BACK", st)
	}
	// Within one kind the id still deduplicates.
	res, err = s.engine.AcceptDeploy(ctx, rules.DeployCallback{RequestID: "42", ProjectID: s.project.ID, MRIID: 7, Status: "success"})
	if err != nil || res != rules.ResultDuplicate {
		t.Fatalf("deploy callback 42 again: %s %v, want DUPLICATE", res, err)
	}
	res, err = s.engine.AcceptApproval(ctx, rules.ApprovalCallback{RequestID: "42", OperationID: waiting.ID, Decision: rules.DecisionApproved})
	if err != nil || res != rules.ResultDuplicate {
		t.Fatalf("approval callback 42 again: %s %v, want DUPLICATE", res, err)
	}
}
