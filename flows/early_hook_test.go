package flows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
)

// TestEarlyPipelineHook is issue 12 point 2: a pipeline webhook processed
// while the change is still in the step right before the wait it answers
// (the job that moves the change into the wait has not committed yet) is
// applied again shortly, so the change leaves the wait on that webhook, not
// on the wait's first poll; no await_pipeline poll runs for it. Without the
// snooze the webhook is recorded as no_change and the poll moves the
// change.
func TestEarlyPipelineHook(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// reach drives a change to the step before the wait and makes the
		// pipeline's webhooks pending; it returns the operation id.
		reach func(t *testing.T, h *flowtest.Harness) string
		// pre is the step the change is in when the webhook is processed;
		// wait the step whose wait the webhook answers.
		pre, wait rules.StepCode
		// woken: the webhook wakes the pre step's poll (a rebase poll), so
		// the change may already be in the wait when the jobs are idle.
		woken bool
	}{
		{name: "new head's pipeline before HANDLE_AWAIT_PIPELINE", pre: rules.HandleRebasing, wait: rules.HandleAwaitPipeline, woken: true,
			reach: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.GitLab.SetRebaseBehavior(h.Project.ID, op.MRIID, gitlabfake.RebaseBehavior{StuckForever: true})
				h.GitLab.PushToTarget(h.Project.ID, "main")
				h.DeliverWebhooks(t)
				h.RunUntil(t, op.ID, rules.HandleRebasing, time.Hour)
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				// The rebase is done and the new head's pipeline passes at
				// once; the handle job has not polled the rebase yet.
				h.GitLab.FinishRebase(h.Project.ID, op.MRIID)
				return op.ID
			}},
		{name: "merge commit's pipeline before HANDLE_MERGED", pre: rules.HandleApproved, wait: rules.HandleMerged,
			reach: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.GitLab.SetMergeBlock(h.Project.ID, op.MRIID, gitlabfake.MergeBlock{DetailedMergeStatus: "checking"})
				h.DeliverWebhooks(t)
				h.RunUntil(t, op.ID, rules.HandleApproved, time.Hour)
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				// GitLab merges it (the merge job's call, whose commit has
				// not happened yet) and the target branch's pipeline passes
				// at once; the handle job has not read the MR again yet.
				h.GitLab.SetMergeBlock(h.Project.ID, op.MRIID, gitlabfake.MergeBlock{})
				snap := h.MR(t, op.ID)
				if _, err := h.ClientAs(t, flowtest.Requester).Merge(context.Background(), h.Project.ID, op.MRIID, platform.MergeParams{SHA: snap.SHA}); err != nil {
					t.Fatalf("merging: %v", err)
				}
				return op.ID
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			poll := flowtest.Poll
			poll.ShortInterval = time.Second // the rebase poll comes within the snoozes
			h := flowtest.New(t, &flowtest.Opts{Poll: poll, Project: gitlabfake.ProjectSpec{MergeMethod: "ff"}, Configure: noDeferCI})
			id := tc.reach(t, h)
			var hooks []gitlabfake.SentWebhook
			for _, w := range h.TakeWebhooks(t) {
				// Only the pipelines' webhooks: the merge request's would
				// settle a merge on their own.
				if ev, err := gitlab.DecodeHook(w.Event, w.Body); err == nil && ev.Pipeline != nil {
					hooks = append(hooks, w)
				}
			}
			if !strings.Contains(flowtest.Describe(hooks), "success") {
				t.Fatalf("no successful pipeline webhook pending:\n%s", flowtest.Describe(hooks))
			}
			h.Deliver(t, hooks...)
			worked := h.WorkUntilIdle(t)
			if at := rules.StepCode(h.Op(t, id).Step); at != tc.pre && (!tc.woken || at != tc.wait) {
				t.Fatalf("after the early webhook the change is at %s, want %s", at, tc.pre)
			}
			worked = append(worked, h.RunFor(t, time.Minute)...)
			var left string
			for _, ev := range h.Events(t, id) {
				if rules.StepCode(ev.FromStep) == tc.wait {
					left = ev.Source
				}
			}
			if !strings.HasPrefix(left, flows.SourceWebhook+":") {
				t.Fatalf("the change left %s on %q, want the early webhook (%s:<delivery>); jobs: %v", tc.wait, left, flows.SourceWebhook, worked)
			}
		})
	}
}
