package flows_test

import (
	"testing"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
)

// TestRetryKeepsADevelopersFix (issue 9 defect 4): after
// CREATE_PIPELINE_FAILED a developer pushes a fix to the change's branch;
// /retry must leave the branch alone (our commit is in its history, not at
// its tip) and carry on with the current head: wait for the pipeline the
// push started, or, when that one failed too, run a new pipeline for it.
func TestRetryKeepsADevelopersFix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		outcomes        []string // MR pipelines: ours, the fix's, a retried one
		wantNewPipeline bool
	}{
		{name: "the fix's pipeline passes", outcomes: []string{"failed", "success"}},
		{name: "the fix's pipeline failed too", outcomes: []string{"failed", "failed", "success"}, wantNewPipeline: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, nil)
			h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: tt.outcomes})
			op := h.Submit(t, flowtest.Change("payments-api"))
			h.WorkUntilIdle(t)
			h.Decide(t, op.ID, rules.DecisionApproved)
			h.WorkUntilIdle(t)
			h.DeliverWebhooks(t)
			h.WorkUntilIdle(t)
			op = h.RequireStep(t, op.ID, rules.CreatePipelineFailed)

			fix := h.GitLab.Push(h.Project.ID, op.SourceBranch, "alice", "Fix the replicas",
				map[string]string{"services/payments-api.yaml": "replicas: 3\n"})
			if fix == "" {
				t.Fatalf("pushing to %s failed", op.SourceBranch)
			}
			h.DeliverWebhooks(t) // the push and its pipeline
			h.WorkUntilIdle(t)
			op = h.RequireStep(t, op.ID, rules.CreatePipelineFailed)
			pipelinesBefore := h.GitLab.CallCount("POST", "/api/v4/projects/*/merge_requests/*/pipelines")

			if _, err := h.Engine.Retry(t.Context(), op, rules.ActionParams{Actor: "alice", Source: "test", Command: "retry"}); err != nil {
				t.Fatalf("/retry: %v", err)
			}
			h.WorkUntilIdle(t)
			if mr := h.MR(t, op.ID); mr.SHA != fix {
				t.Fatalf("MR head after /retry = %.12s; want the developer's fix %.12s left alone", mr.SHA, fix)
			}
			if got := h.Op(t, op.ID); got.HeadSHA != fix {
				t.Fatalf("change head = %.12s; want the fix %.12s", got.HeadSHA, fix)
			}
			newPipelines := h.GitLab.CallCount("POST", "/api/v4/projects/*/merge_requests/*/pipelines") - pipelinesBefore
			if tt.wantNewPipeline != (newPipelines == 1) || newPipelines > 1 {
				t.Fatalf("/retry created %d pipelines; want a new one: %v", newPipelines, tt.wantNewPipeline)
			}
			h.DeliverWebhooks(t)
			h.RunFor(t, flowtest.Poll.ShortInterval) // a pipeline that passed before /retry is found by the poll
			if mr := h.MR(t, op.ID); mr.State != "merged" || mr.SHA != fix {
				t.Fatalf("MR %s at %.12s; want the fix %.12s merged (steps %v)", mr.State, mr.SHA, fix, h.Steps(t, op.ID))
			}
		})
	}
}
