package flows_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
)

// TestPipelineSuccessHookConfirmedBeforeApproving (issue 24 point 3): a
// GitLab merge request pipeline webhook reporting a success at the head the
// change knows moves the change without a read of the merge request, and
// the approve step's read confirms it before any write. Rules by case:
//   - the MR's head pipeline is the one the webhook named and passed: the
//     change is approved and merged, and the webhook cost no MR read;
//   - the webhook names a pipeline that is not the MR's head pipeline (a
//     stale or made-up success; the head's own pipeline failed): no
//     reviewer approves, the change waits for its pipeline again and ends
//     on the head pipeline's failure.
func TestPipelineSuccessHookConfirmedBeforeApproving(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script []string // the MR pipelines' outcomes
		forge  bool     // deliver a success for a pipeline the MR does not have instead
		want   rules.StepCode
	}{
		{name: "the head pipeline passed", script: []string{"success"}, want: rules.HandleMerged},
		{name: "a success the MR does not show", script: []string{"failed"}, forge: true, want: rules.HandleFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, nil)
			h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: tt.script})
			op := h.ToMROpened(t, flowtest.Change("svc"))
			hooks := h.TakeWebhooks(t)
			reads := func() int { return h.GitLab.CallCount(http.MethodGet, "/api/v4/projects/*/merge_requests/*") }
			before := reads()
			var pipeline []gitlabfake.SentWebhook
			for _, w := range hooks {
				if ev, err := gitlab.DecodeHook(w.Event, w.Body); err == nil && ev.Pipeline != nil && ev.Pipeline.MRIID == op.MRIID {
					pipeline = append(pipeline, w)
				}
			}
			if len(pipeline) == 0 {
				t.Fatal("no merge request pipeline webhook")
			}
			if tt.forge {
				w := pipeline[len(pipeline)-1]
				var body map[string]any
				if err := json.Unmarshal(w.Body, &body); err != nil {
					t.Fatal(err)
				}
				attrs := body["object_attributes"].(map[string]any)
				attrs["status"], attrs["id"] = "success", attrs["id"].(float64)+1000
				w.Body, _ = json.Marshal(body)
				w.IdempotencyKey += "-forged"
				pipeline = []gitlabfake.SentWebhook{w}
			}
			h.Deliver(t, pipeline...)
			h.WorkUntilIdle(t)
			if tt.forge {
				h.RequireStep(t, op.ID, rules.HandleAwaitPipeline)
			} else if n := reads() - before; n != 2 {
				t.Errorf("MR reads from the webhook to the merge: %d, want 2 (the approve step's and the merge's; the webhook's none)", n)
			}
			got := h.RunUntil(t, op.ID, tt.want, 10*time.Minute)
			if n := h.GitLab.CallCount(http.MethodPost, "/api/v4/projects/*/merge_requests/*/approve"); tt.forge && n != 0 {
				t.Errorf("approve calls: %d, want 0 (the success was not the MR's)", n)
			}
			if tt.forge {
				wantDetail(t, h, got.ID, "failed")
			}
		})
	}
}

// TestLeavingAWaitRetiresItsPoll (issue 24): a change that leaves a wait
// (the pipeline's, the deploy's) on a webhook retires the wait's scheduled
// poll in the same transaction: no poll job is left to run later only to
// find the change moved on.
func TestLeavingAWaitRetiresItsPoll(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.ToMROpened(t, flowtest.Change("svc"))
	if n := len(h.Jobs(t, rules.KindAwaitPipeline)); n != 1 {
		t.Fatalf("pipeline polls while waiting: %d, want 1", n)
	}
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.HandleMerged)
	if j := h.Jobs(t, rules.KindAwaitPipeline); len(j) != 0 {
		t.Errorf("pipeline polls left after the pipeline's webhook: %d, want 0", len(j))
	}
	if n := len(h.Jobs(t, rules.KindAwaitDeploy)); n != 1 {
		t.Fatalf("deploy polls while waiting: %d, want 1", n)
	}
	h.DeliverWebhooks(t) // the deploy pipeline on the target
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.CalledBack)
	if j := h.Jobs(t, rules.KindAwaitDeploy); len(j) != 0 {
		t.Errorf("deploy polls left after the deploy's webhook: %d, want 0", len(j))
	}
	for _, w := range h.RunFor(t, 10*time.Minute) {
		if w.Kind == rules.KindAwaitPipeline || w.Kind == rules.KindAwaitDeploy {
			t.Errorf("a poll ran after its wait ended: %v", w)
		}
	}
}
