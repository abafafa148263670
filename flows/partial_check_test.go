package flows_test

import (
	"testing"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/gitlab/gitlabfake"
)

// TestPartialCheckHook: a webhook of one check of a waiting change's head
// sha (GitHub's check_run, check_suite, status or workflow_run, decoded as
// a platform.PipelineHook with Partial set and id 0) ends the pipeline wait
// when the head's CI state as a whole has finished: it reads the merge
// request once and decides on its head pipeline, as the await_pipeline
// poll would, with no poll worked; a commit status, whose payload names no
// pull request, is the change's by its source branch. A check of another
// sha and a check
// still running cost no read; a GitLab pipeline hook whose id is not the
// head pipeline's still changes nothing (GitLab's behaviour unchanged).
func TestPartialCheckHook(t *testing.T) {
	t.Parallel()
	const other = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name    string
		ci      string // the fake's MR pipeline outcome (the head's CI state)
		hook    platform.PipelineHook
		oldSHA  bool // the hook names another sha than the head
		noMR    bool // the payload names no merge request (a GitHub commit status)
		outcome string
		reads   int
		want    rules.StepCode
		detail  string // expected detail prefix; "" = unchanged empty
	}{
		{name: "finished check, head passed", ci: "success",
			hook:    platform.PipelineHook{Status: platform.PipelineSuccess, Partial: true, Name: "build"},
			outcome: flows.OutcomeApplied, reads: 1, want: rules.CreateSucceeded},
		{name: "failed check, head failed", ci: "failed",
			hook:    platform.PipelineHook{Status: "failed", Partial: true, Name: "build"},
			outcome: flows.OutcomeApplied, reads: 1, want: rules.CreatePipelineFailed, detail: "pipeline "},
		{name: "finished check, other checks running", ci: "running",
			hook:    platform.PipelineHook{Status: platform.PipelineSuccess, Partial: true, Name: "lint"},
			outcome: flows.OutcomeNoChange, reads: 1, want: rules.CreateMROpened},
		{name: "head waits for a person", ci: "manual",
			hook:    platform.PipelineHook{Status: "manual", Partial: true, Name: "deploy approval"},
			outcome: flows.OutcomeApplied, reads: 1, want: rules.CreateMROpened, detail: "the pipeline waits for a manual job"},
		{name: "status of the head, no pull request in the payload", ci: "success", noMR: true,
			hook:    platform.PipelineHook{Status: platform.PipelineSuccess, Partial: true, Name: "ci/jenkins"},
			outcome: flows.OutcomeApplied, reads: 1, want: rules.CreateSucceeded},
		{name: "check of an old sha", ci: "success", oldSHA: true,
			hook:    platform.PipelineHook{Status: platform.PipelineSuccess, Partial: true, Name: "build"},
			outcome: flows.OutcomeNoChange, reads: 0, want: rules.CreateMROpened},
		{name: "check still running", ci: "success",
			hook:    platform.PipelineHook{Status: "running", Partial: true, Name: "build"},
			outcome: flows.OutcomeNoChange, reads: 0, want: rules.CreateMROpened},
		{name: "gitlab hook of another pipeline id", ci: "success",
			hook:    platform.PipelineHook{Status: platform.PipelineSuccess},
			outcome: flows.OutcomeNoChange, reads: 1, want: rules.CreateMROpened},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, nil)
			h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{tc.ci}})
			op := h.ToMROpened(t, flowtest.Change("payments-api"))
			// The MR pipeline's own webhooks are lost: only the check's
			// webhook below may end the wait.
			h.TakeWebhooks(t)
			op = h.RequireStep(t, op.ID, rules.CreateMROpened)
			hook := tc.hook
			hook.MRIID, hook.SHA, hook.Ref, hook.Source = op.MRIID, op.HeadSHA, op.SourceBranch, "check_run"
			if tc.oldSHA {
				hook.SHA = other
			}
			if tc.noMR {
				hook.MRIID, hook.Source = 0, "status"
			}
			before := mrGets(h)
			got, err := h.Engine.ApplyHook(t.Context(), 1, platform.HookEvent{Kind: platform.HookPipeline,
				ProjectID: op.ProjectID, Pipeline: &hook})
			if err != nil {
				t.Fatalf("ApplyHook: %v", err)
			}
			if got != tc.outcome {
				t.Errorf("outcome %q, want %q", got, tc.outcome)
			}
			if n := mrGets(h) - before; n != tc.reads {
				t.Errorf("the hook read the merge request %d times, want %d", n, tc.reads)
			}
			after := h.RequireStep(t, op.ID, tc.want)
			if tc.detail == "" && after.Detail != "" || len(after.Detail) < len(tc.detail) || after.Detail[:len(tc.detail)] != tc.detail {
				t.Errorf("detail %q, want prefix %q", after.Detail, tc.detail)
			}
		})
	}
}
