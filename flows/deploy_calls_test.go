package flows_test

import (
	"fmt"
	"slices"
	"testing"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
)

// Endpoints of gitlabfake (Call.Endpoint) that deploy detection uses.
const (
	epCompare   = "GET /projects/:id/repository/compare"
	epMergeBase = "GET /projects/:id/repository/merge_base"
)

// deployHooks splits hooks into the successful-or-not pipeline webhooks of
// the target branch (deploy pipelines, in the order GitLab sent them) and
// the rest.
func deployHooks(t *testing.T, hooks []gitlabfake.SentWebhook) (deploy, rest []gitlabfake.SentWebhook) {
	t.Helper()
	for _, w := range hooks {
		ev, err := gitlab.DecodeHook(w.Event, w.Body)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Pipeline != nil && ev.Pipeline.MRIID == 0 && ev.Pipeline.Ref == "main" && (ev.Pipeline.Status == "success" || ev.Pipeline.Status == "canceled" || ev.Pipeline.Status == "failed") {
			deploy = append(deploy, w)
		} else {
			rest = append(rest, w)
		}
	}
	return deploy, rest
}

// TestDeployDetectionCallsPerPipeline (issue 12 point 3): several changes
// merge into the same project before any deploy pipeline reports; their
// pipeline webhooks then arrive in some order (newest first, oldest first,
// duplicated, with redundant pipelines canceled). Each target-branch
// pipeline webhook costs at most one GitLab call (one compare of its sha
// with the branch) however many changes wait, never a merge_base per
// change, and flips exactly the changes its commit contains: after each
// webhook the validated changes are those merged at or before its sha.
func TestDeployDetectionCallsPerPipeline(t *testing.T) {
	t.Parallel()
	const changes = 5
	tests := []struct {
		name   string
		deploy []string // gitlabfake's deploy pipeline outcomes, per merge
		order  func(hooks []gitlabfake.SentWebhook) []gitlabfake.SentWebhook
	}{
		{name: "newest first", order: func(h []gitlabfake.SentWebhook) []gitlabfake.SentWebhook { slices.Reverse(h); return h }},
		{name: "oldest first", order: func(h []gitlabfake.SentWebhook) []gitlabfake.SentWebhook { return h }},
		{name: "every webhook twice, newest first", order: func(h []gitlabfake.SentWebhook) []gitlabfake.SentWebhook {
			slices.Reverse(h)
			return append(h, h...)
		}},
		{name: "middle pipelines canceled", deploy: []string{"success", "canceled", "canceled", "canceled", "success"},
			order: func(h []gitlabfake.SentWebhook) []gitlabfake.SentWebhook { return h }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, &flowtest.Opts{Reviewers: 1})
			if tt.deploy != nil {
				h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{Deploy: tt.deploy})
			}
			var ids []string
			var pipes []gitlabfake.SentWebhook
			for i := range changes {
				op := h.ToMerged(t, flowtest.Change(fmt.Sprintf("svc%d", i)))
				ids = append(ids, op.ID)
				deploy, rest := deployHooks(t, h.TakeWebhooks(t))
				if len(deploy) != 1 {
					t.Fatalf("change %d: %d finished deploy pipeline webhooks, want 1", i, len(deploy))
				}
				pipes = append(pipes, deploy[0])
				h.Deliver(t, rest...)
				h.WorkUntilIdle(t)
			}
			mergedAt := map[string]int{} // merge commit -> index of the change
			for i, id := range ids {
				mergedAt[h.RequireStep(t, id, rules.HandleMerged).MergeCommitSHA] = i
			}
			statuses := map[string]int{}
			for _, w := range pipes {
				ev, _ := gitlab.DecodeHook(w.Event, w.Body)
				statuses[ev.Pipeline.Status]++
			}
			if tt.deploy != nil && statuses["canceled"] == 0 {
				t.Fatalf("deploy pipelines %v, want some canceled (script %v)", statuses, tt.deploy)
			}
			newestDeployed := -1 // newest change whose commit a successful pipeline covers so far
			start := h.GitLab.CallsByEndpoint()
			delivered := 0
			defer func() {
				end := h.GitLab.CallsByEndpoint()
				t.Logf("%s: %d target-branch pipeline webhooks for %d merged changes: %d compare, %d merge_base",
					tt.name, delivered, changes, end[epCompare]-start[epCompare], end[epMergeBase]-start[epMergeBase])
			}()
			for _, w := range tt.order(slices.Clone(pipes)) {
				ev, _ := gitlab.DecodeHook(w.Event, w.Body)
				before := h.GitLab.CallsByEndpoint()
				beforeN := len(h.GitLab.Calls())
				h.Deliver(t, w)
				h.WorkUntilIdle(t)
				delivered++
				after := h.GitLab.CallsByEndpoint()
				if n := len(h.GitLab.Calls()) - beforeN; n > 1 {
					t.Errorf("pipeline %d (%s at change %d) cost %d GitLab calls, want at most 1: %v",
						ev.Pipeline.ID, ev.Pipeline.Status, mergedAt[ev.Pipeline.SHA], n, diffCalls(before, after))
				}
				if n := after[epMergeBase] - before[epMergeBase]; n != 0 {
					t.Errorf("pipeline %d made %d merge_base calls, want 0", ev.Pipeline.ID, n)
				}
				if ev.Pipeline.Status == "success" {
					newestDeployed = max(newestDeployed, mergedAt[ev.Pipeline.SHA])
				}
				for i, id := range ids {
					want := rules.HandleMerged
					if i <= newestDeployed {
						want = rules.CalledBack
					}
					h.RequireStep(t, id, want)
				}
			}
			if newestDeployed != changes-1 {
				t.Fatalf("the newest change was not deployed by any pipeline (newest %d)", newestDeployed)
			}
		})
	}
}

// diffCalls is after minus before, by endpoint.
func diffCalls(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for e, n := range after {
		if d := n - before[e]; d > 0 {
			out[e] = d
		}
	}
	return out
}
