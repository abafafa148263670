package flows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// TestPipelineWaitsForPersonRules: an MR pipeline that waits for a person
// (a manual job, a delayed job, a resource) has neither failed nor passed:
// the change keeps waiting with a detail naming what GitLab waits for, as
// soon as the pipeline's webhook or the next poll shows it, and parks in
// its pending step at the pipeline deadline with that detail (issue 10
// point 8).
func TestPipelineWaitsForPersonRules(t *testing.T) {
	t.Parallel()
	waits := []struct {
		status, hint string
	}{
		{"manual", "the pipeline waits for a manual job: play it in GitLab"},
		{"scheduled", "the pipeline waits for a delayed job's scheduled time"},
		{"waiting_for_resource", "the pipeline waits for a resource another pipeline holds"},
	}
	var cases []rule
	for _, c := range waits {
		start := func(t *testing.T, h *flowtest.Harness, lose bool) string {
			t.Helper()
			h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{c.status}})
			op := h.ToMROpened(t, flowtest.Change("svc"))
			if lose {
				h.TakeWebhooks(t)
				h.Advance(flowtest.Poll.ShortInterval) // the poll reads the pipeline
			} else {
				h.DeliverWebhooks(t)
			}
			h.WorkUntilIdle(t)
			h.RequireStep(t, op.ID, rules.CreateMROpened)
			wantDetail(t, h, op.ID, c.hint)
			if mr := h.MR(t, op.ID); mr.HeadPipelineStatus != c.status {
				t.Fatalf("head pipeline %s, want %s", mr.HeadPipelineStatus, c.status)
			}
			return op.ID
		}
		pending := func(t *testing.T, h *flowtest.Harness, id string) {
			wantDetail(t, h, id, "after 2h0m0s: "+c.hint)
			wantBinding(t, h, id, store.StatusMRCreating)
			wantCalls(t, h, http.MethodPost, pathApprove, "", false, 0)
		}
		cases = append(cases,
			rule{name: c.status + ": webhook, waits saying so, pending at the deadline", want: rules.CreatePipelinePending,
				run: func(t *testing.T, h *flowtest.Harness) string {
					id := start(t, h, false)
					return h.RunUntil(t, id, rules.CreatePipelinePending, flowtest.Poll.PipelineDeadline+time.Minute).ID
				},
				check: pending},
			rule{name: c.status + ": webhook lost, the poll finds it", want: rules.CreatePipelinePending,
				run: func(t *testing.T, h *flowtest.Harness) string {
					id := start(t, h, true)
					return h.RunUntil(t, id, rules.CreatePipelinePending, flowtest.Poll.PipelineDeadline+time.Minute).ID
				},
				check: pending})
	}
	cases = append(cases, rule{name: "manual: a person plays the job, the change goes on by itself", want: rules.HandleMerged,
		run: func(t *testing.T, h *flowtest.Harness) string {
			h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"manual"}})
			op := h.ToMROpened(t, flowtest.Change("svc"))
			job := manualJob(t, h)
			h.DeliverWebhooks(t)
			h.WorkUntilIdle(t)
			wantDetail(t, h, op.ID, "play it in GitLab")
			h.RunFor(t, time.Hour)
			h.RequireStep(t, op.ID, rules.CreateMROpened)
			playJob(t, h, "alice", job)
			h.DeliverWebhooks(t)
			h.WorkUntilIdle(t)
			return op.ID
		},
		check: func(t *testing.T, h *flowtest.Harness, id string) {
			if op := h.Op(t, id); op.Detail != "" {
				t.Fatalf("detail %q after the pipeline passed, want it cleared", op.Detail)
			}
		}})
	runRules(t, cases)
}

// manualJob returns the id of the job of the MR pipeline that waits in
// "manual", from its captured Pipeline Hook (builds[0].id).
func manualJob(t *testing.T, h *flowtest.Harness) int64 {
	t.Helper()
	for _, w := range h.Webhooks(t) {
		var body struct {
			ObjectAttributes struct{ Status string } `json:"object_attributes"`
			Builds           []struct{ ID int64 }    `json:"builds"`
		}
		if w.Event == "Pipeline Hook" && json.Unmarshal(w.Body, &body) == nil &&
			body.ObjectAttributes.Status == "manual" && len(body.Builds) > 0 {
			return body.Builds[0].ID
		}
	}
	t.Fatalf("no Pipeline Hook in manual among\n%s", flowtest.Describe(h.Webhooks(t)))
	return 0
}

// playJob plays job as person (POST /projects/:id/jobs/:job_id/play).
func playJob(t *testing.T, h *flowtest.Harness, person string, job int64) {
	t.Helper()
	u := fmt.Sprintf("%s/api/v4/projects/%d/jobs/%d/play", h.GitLab.URL(), h.Project.ID, job)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("PRIVATE-TOKEN", person+"-token")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s playing job %d: %d", person, job, res.StatusCode)
	}
}
