package flows_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// Rules that follow from the step table, run in-process by flows/flowtest:
// /resume, a merge made by a person, and the runner's handling of a move
// the table does not allow (issue 9 defects 7 and 8).

var resumeBy = flows.ActionParams{Actor: "maria", Source: "test", Command: "resume"}

// toCreateStarted submits a change (approval first), approves it and
// returns it at CREATE_STARTED with its create job queued, not yet worked.
func toCreateStarted(t *testing.T, h *flowtest.Harness) store.Operation {
	t.Helper()
	op := h.Submit(t, flowtest.Change("payments-api"))
	h.WorkUntilIdle(t)
	if res := h.Decide(t, op.ID, flows.DecisionApproved); res != flows.ResultAccepted {
		t.Fatalf("approving: %s", res)
	}
	return h.RequireStep(t, op.ID, flows.CreateStarted)
}

// loseCreateJob deletes the create job, as when a job is discarded.
func loseCreateJob(t *testing.T, h *flowtest.Harness, _ store.Operation) {
	t.Helper()
	if _, err := h.Schema.Pool.Exec(context.Background(), `DELETE FROM river_job WHERE kind = $1`, flows.KindCreateMR); err != nil {
		t.Fatal(err)
	}
}

// TestResumeKeepsOneJobPerStep: /resume of a step whose job is still
// queued (here retrying after a GitLab 503, which also wrote the attempt on
// the operation) or was enqueued by an earlier /resume never queues a second
// job for the same (operation, step): two create jobs could commit twice
// (issue 9 defect 7). A job waiting for its retry is made due at once.
func TestResumeKeepsOneJobPerStep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(t *testing.T, h *flowtest.Harness, op store.Operation)
		resumes int
		// together runs the resumes concurrently.
		together bool
	}{
		{"job retrying after a 503", func(t *testing.T, h *flowtest.Harness, op store.Operation) {
			h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodGet, PathPattern: "/api/v4/projects/*", Status: 503, Times: 1})
			w := h.WorkUntilIdle(t)
			if len(w) != 1 || w[0].Err == nil || len(h.Jobs(t, flows.KindCreateMR)) != 1 {
				t.Fatalf("the create job did not fail transiently: %v", w)
			}
		}, 1, false},
		{"job lost, resumed twice", loseCreateJob, 2, false},
		{"job lost, resumed four times at once", loseCreateJob, 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, nil)
			op := toCreateStarted(t, h)
			tt.prepare(t, h, op)
			at := h.Op(t, op.ID)
			errs := make(chan error, tt.resumes)
			for range tt.resumes {
				resume := func() {
					_, err := h.Engine.Resume(context.Background(), at, resumeBy)
					errs <- err
				}
				if tt.together {
					go resume()
				} else {
					resume()
				}
			}
			for range tt.resumes {
				if err := <-errs; err != nil {
					t.Fatalf("resume: %v", err)
				}
			}
			if jobs := h.Jobs(t, flows.KindCreateMR); len(jobs) != 1 {
				var args []string
				for _, j := range jobs {
					args = append(args, string(j.EncodedArgs))
				}
				t.Fatalf("%d live create jobs after /resume, want 1: %s", len(jobs), strings.Join(args, " "))
			}
			h.WorkUntilIdle(t) // no clock advance: the resumed job is due now
			h.RequireStep(t, op.ID, flows.CreateMROpened)
			if n := calls(h, http.MethodPost, pathCommits, "", true); n != 1 {
				t.Errorf("%d commits, want 1", n)
			}
		})
	}
}
