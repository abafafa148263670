package flows_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// Rules that follow from the step table, run in-process by flows/flowtest:
// /resume, a merge made by a person, and the runner's handling of a move
// the table does not allow (issue 9 defects 7 and 8).

var resumeBy = rules.ActionParams{Actor: "maria", Source: "test", Command: "resume"}

// toCreateStarted submits a change (approval first), approves it and
// returns it at CREATE_STARTED with its create job queued, not yet worked.
func toCreateStarted(t *testing.T, h *flowtest.Harness) store.Operation {
	t.Helper()
	op := h.Submit(t, flowtest.Change("payments-api"))
	h.WorkUntilIdle(t)
	if res := h.Decide(t, op.ID, rules.DecisionApproved); res != rules.ResultAccepted {
		t.Fatalf("approving: %s", res)
	}
	return h.RequireStep(t, op.ID, rules.CreateStarted)
}

// loseCreateJob deletes the create job, as when a job is discarded.
func loseCreateJob(t *testing.T, h *flowtest.Harness, _ store.Operation) {
	t.Helper()
	h.RequirePostgres(t, "deletes river_job rows through the PostgreSQL pool (h.Schema.Pool)")
	if _, err := h.Schema.Pool.Exec(context.Background(), `DELETE FROM river_job WHERE kind = $1`, rules.KindCreateMR); err != nil {
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
			// The create job's first call, the commit that creates the
			// branch (the project read is the submit check's, shared when
			// under a minute old; one file's action is guessed, no tree
			// listing).
			h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: "/api/v4/projects/*/repository/commits", Status: 503, Times: 1})
			w := h.WorkUntilIdle(t)
			if len(w) != 1 || w[0].Err == nil || len(h.Jobs(t, rules.KindCreateMR)) != 1 {
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
			if jobs := h.Jobs(t, rules.KindCreateMR); len(jobs) != 1 {
				var args []string
				for _, j := range jobs {
					args = append(args, string(j.EncodedArgs))
				}
				t.Fatalf("%d live create jobs after /resume, want 1: %s", len(jobs), strings.Join(args, " "))
			}
			h.WorkUntilIdle(t) // no clock advance: the resumed job is due now
			h.RequireStep(t, op.ID, rules.CreateMROpened)
			if n := calls(h, http.MethodPost, pathCommits, "", true); n != 1 {
				t.Errorf("%d commits, want 1", n)
			}
		})
	}
}

// mergeAsPerson merges the change's MR in GitLab as its requester (a
// maintainer) would,
// whatever its pipeline says, and returns the merged MR.
func mergeAsPerson(t *testing.T, h *flowtest.Harness, id string) gitlabfake.MRSnapshot {
	t.Helper()
	op := h.Op(t, id)
	h.GitLab.SetMergeBlock(op.ProjectID, op.MRIID, gitlabfake.MergeBlock{DetailedMergeStatus: "mergeable"})
	mr := h.MR(t, id)
	if _, err := h.ClientAs(t, flowtest.Requester).Merge(context.Background(), op.ProjectID, op.MRIID, platform.MergeParams{SHA: mr.SHA}); err != nil {
		t.Fatalf("merging !%d as a person: %v", op.MRIID, err)
	}
	h.Settle(t)
	return h.MR(t, id)
}

// TestMergedByAPersonFinishesAsMerged: an MR a person merges in GitLab while
// the change is still in the create phase (or, MR first, waits for its
// approval) finishes as merged and waits for the deploy, whether the merge
// webhook, the pipeline poll or /cancel finds it (issue 9 defect 8).
func TestMergedByAPersonFinishesAsMerged(t *testing.T) {
	t.Parallel()
	// The MR pipeline never finishes unless a case says otherwise: only the
	// merge moves the change on.
	running := gitlabfake.PipelineScript{MR: []string{"running"}}
	tests := []struct {
		name    string
		script  gitlabfake.PipelineScript
		mrFirst bool
		// at drives the change to the step where the person merges.
		at    func(t *testing.T, h *flowtest.Harness, id string)
		step  rules.StepCode
		found func(t *testing.T, h *flowtest.Harness, id string) // how the bot learns of the merge
	}{
		{"poll at CREATE_MR_OPENED", running, false, nil, rules.CreateMROpened, byPoll},
		{"webhook at CREATE_MR_OPENED", running, false, nil, rules.CreateMROpened, byWebhook},
		{"/cancel at CREATE_MR_OPENED", running, false, nil, rules.CreateMROpened, byCancel},
		{"webhook at CREATE_PIPELINE_PENDING", running, false, func(t *testing.T, h *flowtest.Harness, id string) {
			h.RunUntil(t, id, rules.CreatePipelinePending, flowtest.Poll.PipelineDeadline+flowtest.Poll.LongInterval)
		}, rules.CreatePipelinePending, byWebhook},
		{"/cancel at CREATE_PIPELINE_PENDING", running, false, func(t *testing.T, h *flowtest.Harness, id string) {
			h.RunUntil(t, id, rules.CreatePipelinePending, flowtest.Poll.PipelineDeadline+flowtest.Poll.LongInterval)
		}, rules.CreatePipelinePending, byCancel},
		{"webhook at CREATE_PIPELINE_FAILED", gitlabfake.PipelineScript{MR: []string{"failed"}}, false, deliverAll,
			rules.CreatePipelineFailed, byWebhook},
		{"/cancel at CREATE_PIPELINE_FAILED", gitlabfake.PipelineScript{MR: []string{"failed"}}, false, deliverAll,
			rules.CreatePipelineFailed, byCancel},
		{"webhook at APPROVAL_SENT, MR first", gitlabfake.PipelineScript{}, true, deliverAll, rules.ApprovalSent, byWebhook},
		{"/cancel at APPROVAL_SENT, MR first", gitlabfake.PipelineScript{}, true, deliverAll, rules.ApprovalSent, byCancel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The requester is a maintainer here, so she may merge.
			h := flowtest.New(t, &flowtest.Opts{Project: gitlabfake.ProjectSpec{
				Members: map[string]int{flowtest.Requester: gitlabfake.AccessMaintainer}}})
			h.GitLab.SetPipelineScript(h.Project.ID, tt.script)
			p := flowtest.Change("payments-api")
			p.ApprovalFirst = !tt.mrFirst
			op := h.ToMROpened(t, p)
			if tt.at != nil {
				tt.at(t, h, op.ID)
			}
			h.RequireStep(t, op.ID, tt.step)
			mr := mergeAsPerson(t, h, op.ID)
			tt.found(t, h, op.ID)
			got := h.RequireStep(t, op.ID, rules.HandleMerged)
			if got.MergeCommitSHA == "" || got.MergeCommitSHA != mr.MergeCommitSHA {
				t.Errorf("merge commit %q recorded, GitLab has %q", got.MergeCommitSHA, mr.MergeCommitSHA)
			}
			// It waits for the deploy (the merge started the deploy pipeline;
			// its webhooks are dropped, so the deploy poll finds it).
			h.TakeWebhooks(t)
			h.RunUntil(t, op.ID, rules.CalledBack, flowtest.Poll.LongInterval)
		})
	}
}

func deliverAll(t *testing.T, h *flowtest.Harness, _ string) {
	t.Helper()
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
}

// byPoll drops the merge webhook: the pipeline wait's next poll finds the
// merged MR.
func byPoll(t *testing.T, h *flowtest.Harness, _ string) {
	t.Helper()
	h.TakeWebhooks(t)
	h.Advance(flowtest.Poll.ShortInterval)
	h.WorkUntilIdle(t)
}

// byWebhook delivers the Merge Request Hook "merge" (and the rest).
func byWebhook(t *testing.T, h *flowtest.Harness, _ string) {
	t.Helper()
	var merge []gitlabfake.SentWebhook
	for _, w := range h.TakeWebhooks(t) {
		if strings.Contains(string(w.Body), `"action":"merge"`) {
			merge = append(merge, w)
		}
	}
	if len(merge) != 1 {
		t.Fatalf("%d merge webhooks", len(merge))
	}
	h.Deliver(t, merge...)
	h.WorkUntilIdle(t)
}

// byCancel drops the webhooks and cancels: /cancel reads the MR, finds it
// merged, records the merge and says the change can no longer be cancelled.
func byCancel(t *testing.T, h *flowtest.Harness, id string) {
	t.Helper()
	h.TakeWebhooks(t)
	_, err := h.Engine.Cancel(context.Background(), h.Op(t, id), rules.ActionParams{Actor: "maria", Source: "test", Command: "cancel"})
	if !errors.Is(err, rules.ErrNotApplicable) {
		t.Fatalf("cancel of a merged change: %v, want ErrNotApplicable", err)
	}
}

// TestIllegalTransitionIsNotRetried: a step whose move the table refuses
// fails for good at once, into the job's declared failure with a detail a
// person can read; the runner does not retry it as if GitLab were down
// (issue 9 defect 8).
func TestIllegalTransitionIsNotRetried(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.Submit(t, flowtest.Change("payments-api"))
	err := h.Engine.RunStepFunc(context.Background(), rules.KindRequestApproval, op.ID, rules.ApprovalSending, 1, flows.MaxAttempts,
		func(ctx context.Context, op store.Operation) error {
			_, err := h.Engine.Transition(ctx, op, rules.CalledBack, flows.TransitionOpts{Source: "test"})
			return err
		})
	if err != nil {
		t.Fatalf("the runner returned %v: River would retry it", err)
	}
	got := h.RequireStep(t, op.ID, rules.ApprovalSendPending)
	if !strings.Contains(got.Detail, "illegal transition APPROVAL_SENDING") {
		t.Errorf("detail %q does not name the refused move", got.Detail)
	}
}

// TestReenteredStepKeepsOneJob: a change that comes back to a step whose
// job from its last visit is still queued (here the pipeline wait's poll,
// snoozed, when a pipeline webhook moved the change on and the merge sent
// it back to wait) ends with one job for that step, not two polling side by
// side (issue 9 defect 7: at most one job per operation and step).
func TestReenteredStepKeepsOneJob(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.ToMROpened(t, flowtest.Change("payments-api"))
	h.GitLab.SetMergeBlock(h.Project.ID, h.MR(t, op.ID).IID, gitlabfake.MergeBlock{DetailedMergeStatus: "ci_still_running"})
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t) // pipeline passed; approve; GitLab says ci_still_running: back to the pipeline wait
	h.RequireStep(t, op.ID, rules.HandleAwaitPipeline)
	if jobs := liveStepJobs(t, h, rules.KindAwaitPipeline, rules.HandleAwaitPipeline); len(jobs) != 1 {
		t.Fatalf("%d pipeline waits queued, want 1: %s", len(jobs), strings.Join(jobs, " "))
	}
	// A new pipeline of the head passes; its webhook (not the snoozed poll)
	// moves the change on, and GitLab sends it back to wait once more.
	cur := h.Op(t, op.ID)
	if _, err := h.Client.CreateMergeRequestPipeline(context.Background(), cur.ProjectID, cur.MRIID); err != nil {
		t.Fatal(err)
	}
	h.Settle(t)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	if got := h.Op(t, op.ID); got.Step != int(rules.HandleAwaitPipeline) || got.Rounds != 2 {
		t.Fatalf("at %s after %d rounds, want HANDLE_AWAIT_PIPELINE after 2", rules.StepCode(got.Step), got.Rounds)
	}
	if jobs := liveStepJobs(t, h, rules.KindAwaitPipeline, rules.HandleAwaitPipeline); len(jobs) != 1 {
		t.Fatalf("%d pipeline waits queued for the step, want 1: %s", len(jobs), strings.Join(jobs, " "))
	}
	h.GitLab.SetMergeBlock(h.Project.ID, cur.MRIID, gitlabfake.MergeBlock{})
	h.TakeWebhooks(t)
	h.RunUntil(t, op.ID, rules.HandleMerged, flowtest.Poll.LongInterval)
}

// liveStepJobs returns the arguments of the live jobs of kind for step.
func liveStepJobs(t *testing.T, h *flowtest.Harness, kind string, step rules.StepCode) []string {
	t.Helper()
	var out []string
	for _, j := range h.Jobs(t, kind) {
		var a flows.OperationArgs
		if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
			t.Fatal(err)
		}
		if a.Step == int(step) {
			out = append(out, string(j.EncodedArgs))
		}
	}
	return out
}

// TestJobNotNamedByTheStepDoesNothing: a step job that finds its change at
// a step whose row in the step table names no job of its kind (a pipeline
// poll left over at the parked CREATE_PIPELINE_PENDING) calls nothing and
// moves nothing; the parked step waits for a webhook or /resume.
func TestJobNotNamedByTheStepDoesNothing(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"running"}})
	op := h.ToMROpened(t, flowtest.Change("payments-api"))
	op = h.RunUntil(t, op.ID, rules.CreatePipelinePending, flowtest.Poll.PipelineDeadline+flowtest.Poll.LongInterval)
	before := len(h.GitLab.Calls())
	if err := h.Engine.RunJob(context.Background(), rules.KindAwaitPipeline, op.ID, rules.CreatePipelinePending, 1, flows.MaxAttempts); err != nil {
		t.Fatalf("the stale job returned %v", err)
	}
	if got := h.Op(t, op.ID); got.Version != op.Version {
		t.Errorf("the stale job wrote the change: version %d -> %d", op.Version, got.Version)
	}
	if n := len(h.GitLab.Calls()) - before; n != 0 {
		t.Errorf("the stale job made %d GitLab calls", n)
	}
}
