package flows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// TestCreateDecidesFileActionsFromOneTreeListing (issue 9 defect 3): a
// change of 300 files without an action, half of them existing, is
// committed with "update" for the existing ones and "create" for the others,
// decided from the repository tree listing (a few paginated requests), not
// from one raw-file read per file.
func TestCreateDecidesFileActionsFromOneTreeListing(t *testing.T) {
	t.Parallel()
	existing := map[string]string{}
	p := flowtest.Change("many-files")
	p.Files = nil
	for i := range 150 {
		existing[fmt.Sprintf("cfg/old/%03d.yaml", i)] = "v: 0\n"
		p.Files = append(p.Files, store.File{Path: fmt.Sprintf("cfg/old/%03d.yaml", i), Content: "v: 1\n"},
			store.File{Path: fmt.Sprintf("cfg/new/%03d.yaml", i), Content: "v: 1\n"})
	}
	h := flowtest.New(t, &flowtest.Opts{Project: gitlabfake.ProjectSpec{Files: existing}})
	op := h.Submit(t, p)
	h.WorkUntilIdle(t)
	h.Decide(t, op.ID, rules.DecisionApproved)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.CreateMROpened) // the fake refuses "create" on an existing file
	if n := h.GitLab.CallCount("GET", "/api/v4/projects/*/repository/files/*/raw"); n != 0 {
		t.Errorf("%d raw-file reads; want none", n)
	}
	if n := h.GitLab.CallCount("GET", "/api/v4/projects/*/repository/tree"); n < 1 || n > 2 {
		t.Errorf("%d tree requests; want one listing of cfg (151 entries: 2 pages)", n)
	}
}

// TestTimedOutJobWritesItsDeclaredState (issue 9 defect 3): when GitLab
// hangs until the job's context expires on its last attempt, the job's
// declared failure (create) or pending step (pipeline wait) is still
// written, on a fresh bounded context, instead of leaving the change in
// progress with no job for the sweeper to re-queue forever. (The job runs
// outside the harness's workers, which fail a test whose job times out.)
func TestTimedOutJobWritesItsDeclaredState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kind string
		at   rules.StepCode
		want rules.StepCode
	}{
		{name: "create", kind: rules.KindCreateMR, at: rules.CreateStarted, want: rules.CreateFailed},
		{name: "pipeline wait", kind: rules.KindAwaitPipeline, at: rules.CreateMROpened, want: rules.CreatePipelinePending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, nil)
			op := h.Submit(t, flowtest.Change("payments-api"))
			h.WorkUntilIdle(t)
			h.Decide(t, op.ID, rules.DecisionApproved)
			if tt.at == rules.CreateMROpened {
				h.WorkUntilIdle(t)
				h.TakeWebhooks(t)
			}
			op = h.RequireStep(t, op.ID, tt.at)
			h.GitLab.SetLatency(time.Hour) // GitLab hangs
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			_ = h.Engine.RunJob(ctx, tt.kind, op.ID, tt.at, flows.MaxAttempts, flows.MaxAttempts)
			if ctx.Err() == nil {
				t.Fatal("the job ended before its context expired; the test did not make GitLab hang")
			}
			h.RequireStep(t, op.ID, tt.want)
		})
	}
}
