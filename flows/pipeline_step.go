package flows

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

// stepped returns how long to wait, on schedule p at now, before the next
// poll of a wait that started at since, or ok=false when its deadline has
// passed: ShortCount short intervals, then long ones (DESIGN §3 step 5).
func stepped(p PollConfig, now, since time.Time, deadline time.Duration) (time.Duration, bool) {
	elapsed := now.Sub(since)
	if elapsed >= deadline {
		return 0, false
	}
	d := p.LongInterval
	if elapsed < time.Duration(p.ShortCount)*p.ShortInterval {
		d = p.ShortInterval
	}
	if rest := deadline - elapsed; d > rest {
		d = rest
	}
	return d, true
}

// awaitPipeline is the polling fallback of the pipeline webhook: it reads the
// MR's head pipeline and decides, or snoozes, or parks the change in a
// pending step at the deadline.
func (e pipelineWorker) awaitPipeline(ctx context.Context, op store.Operation) error {
	mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, false)
	if err != nil {
		return err
	}
	switch mr.State {
	case platform.MRStateMerged:
		return e.finishMerged(ctx, op, mr, "job:"+rules.KindAwaitPipeline)
	case platform.MRStateClosed:
		return e.closedByPerson(ctx, op, mr.ClosedBy.Username, "job:"+rules.KindAwaitPipeline)
	}
	if p := headPipeline(mr); p != nil && p.Finished() {
		return e.pipelineFinished(ctx, op, mr.SHA, *p, "job:"+rules.KindAwaitPipeline, true)
	}
	waiting := ""
	if hp := headPipeline(mr); hp != nil {
		waiting = waitsForPerson(rules.WordsOf(op.Platform), hp.Status)
		if waiting != "" && op.Detail != waiting {
			e.notePersonWait(ctx, op, *hp, waiting, "job:"+rules.KindAwaitPipeline)
		}
	}
	p := e.pollFor(op)
	if d, ok := stepped(p, e.now(), op.StepStartedAt, p.PipelineDeadline); ok {
		return snoozeFor(d)
	}
	// Past the deadline the wait parks in its job's declared step.
	detail := fmt.Sprintf("no %s result for %s after %s", rules.WordsOf(op.Platform).Pipeline, short(mr.SHA), p.PipelineDeadline)
	if waiting != "" {
		detail += ": " + waiting
	}
	_, err = e.Transition(ctx, op, declaredFailure(rules.KindAwaitPipeline, op), TransitionOpts{Source: "job:" + rules.KindAwaitPipeline,
		Payload: map[string]any{"deadline": p.PipelineDeadline.String()},
		Update:  func(o *store.Operation) { o.Detail = detail }})
	return err
}

// waitsForPerson returns what a pipeline in status waits for when that is
// a person in GitLab, as the hint people see, and "" otherwise. Such a
// pipeline has neither failed nor passed: the change keeps waiting for it
// and parks in its pending step at the pipeline deadline (issue 10 point
// 8). GitLab's pipeline statuses: manual (its detailed status is
// "blocked"), scheduled (a delayed job), waiting_for_resource (a
// resource_group held by another pipeline); doc/api/pipelines.md.
//
// On GitHub (w) the only such status is manual, a check or workflow run
// waiting (a deployment that waits for a person's review).
func waitsForPerson(w rules.Words, status string) string {
	if w.OnGitHub() {
		if status == "manual" || status == "blocked" {
			return "the checks wait for a person: review the waiting deployment in GitHub"
		}
		return ""
	}
	switch status {
	case "manual", "blocked":
		return "the pipeline waits for a manual job: play it in GitLab"
	case "scheduled":
		return "the pipeline waits for a delayed job's scheduled time: wait for it, or play the job now in GitLab"
	case "waiting_for_resource":
		return "the pipeline waits for a resource another pipeline holds (resource_group): let that one finish, or cancel it in GitLab"
	}
	return ""
}

// notePersonWait records on the change that its pipeline waits for a
// person (detail waiting, an attempt event naming the pipeline) and
// refreshes the status comment: a same-step write with compare-and-set on
// the version; a lost race is left to the next poll.
func (e *Engine) notePersonWait(ctx context.Context, op store.Operation, p platform.Pipeline, waiting, source string) {
	_, err := e.recordInStep(ctx, op, source,
		map[string]any{"action": "pipeline_waits_for_person", "pipeline_id": p.ID, "pipeline_status": p.Status, "detail": waiting},
		func(o *store.Operation) { o.Detail = waiting }, e.refreshNoteJobs(op, op.Version+1))
	if err != nil && !isConflict(err) {
		e.opLog(op).Warn("recording the pipeline's wait for a person failed", "err", err)
	}
}

// headPipeline returns the MR's pipeline for its current head: the head
// pipeline when it ran on the head sha or on the MR's merge ref (merged
// results pipelines run on a merge-ref commit, GITLAB-FACTS §1.4).
func headPipeline(mr platform.MergeRequest) *platform.Pipeline {
	p := mr.HeadPipeline
	if p == nil {
		return nil
	}
	if p.SHA == mr.SHA || p.Ref == fmt.Sprintf("refs/merge-requests/%d/merge", mr.IID) {
		return p
	}
	return nil
}

// pipelineUnconfirmed is the payload key of a pipeline's transition whose
// success was taken on its webhook's word (pipelineHookTrusted): the approve
// step confirms it on the merge request before approving.
const pipelineUnconfirmed = "pipeline_unconfirmed"

// pipelineFinished applies a finished pipeline of head to op; confirmed is
// false when the pipeline's state comes from its webhook alone, not from a
// read of the merge request (pipelineUnconfirmed).
func (e *Engine) pipelineFinished(ctx context.Context, op store.Operation, head string, p platform.Pipeline, source string, confirmed bool) error {
	step := rules.StepCode(op.Step)
	if !rules.WaitsForPipeline(step) || p.ID < op.PipelineID {
		// Not waiting, or a pipeline older than the one the change waits
		// for (the new pipeline of a /resume after a close; GitLab's
		// pipeline ids only grow): its result no longer counts.
		return nil
	}
	update := func(o *store.Operation) {
		o.HeadSHA, o.PipelineID, o.PipelineURL = head, p.ID, p.WebURL
	}
	payload := map[string]any{"pipeline_id": p.ID, "pipeline_status": p.Status, "head_sha": head}
	if !confirmed {
		payload[pipelineUnconfirmed] = true
	}
	var to rules.StepCode
	switch {
	case p.Status == platform.PipelineSuccess && rules.InCreatePhase(step):
		to = rules.CreateSucceeded
	case p.Status == platform.PipelineSuccess:
		to = rules.HandleStarted
	case rules.InCreatePhase(step):
		to = rules.CreatePipelineFailed
	default:
		to = rules.HandleFailed
	}
	if to == rules.HandleFailed {
		if retried, err := e.retryHeadPipeline(ctx, op, head, p, source); retried || err != nil {
			return err
		}
	}
	if to == rules.CreatePipelineFailed || to == rules.HandleFailed {
		prev := update
		update = func(o *store.Operation) {
			prev(o)
			o.Detail = fmt.Sprintf("pipeline %d %s for %s", p.ID, p.Status, short(head))
		}
	} else {
		prev := update
		update = func(o *store.Operation) { prev(o); o.Detail = "" }
	}
	_, err := e.Transition(ctx, op, to, TransitionOpts{Source: source, Payload: payload, Update: update})
	return err
}

func short(sha string) string {
	if len(sha) > 8 {
		return sha[:8]
	}
	return sha
}

// pipelinePlatform is what the pipeline step (the MR pipeline of the head)
// itself calls on the platform (issue 20 point 2: a step worker is given
// only the methods it calls); the engine's shared moves (Transition,
// failures) keep their own.
type pipelinePlatform interface {
	MergeRequest(ctx context.Context, projectID, iid int64, includeRebase bool) (platform.MergeRequest, error)
}

// pipelineWorker runs the pipeline step (the MR pipeline of the head) with
// pipelinePlatform in place of the engine's whole platform; it calls the
// store only through the engine's shared moves.
type pipelineWorker struct {
	*Engine
	gl pipelinePlatform
}

// pipelineWorker is e's pipeline step (the MR pipeline of the head) worker.
func (e *Engine) pipelineWorker() pipelineWorker { return pipelineWorker{Engine: e, gl: e.gl} }

// actionPipelineRetried is the action of the attempt event of a head
// pipeline run again (retryHeadPipeline).
const actionPipelineRetried = "pipeline_retried"

// retryHeadPipeline runs the pipeline of the merge queue's head again
// after it failed (failed, at head), once per queue.pipeline_retries
// (issue 22 point 3): a flaky job must not fail a change that waited its
// turn, and the queue must not wait on it either, so this is the head's
// only second chance. It reports whether it started a new pipeline, which
// the change then waits for in the same step (its id recorded, so the
// failed one's result no longer counts). A change that does not hold the
// head, or has used its retries, is blamed as before.
func (e *Engine) retryHeadPipeline(ctx context.Context, op store.Operation, head string, failed platform.Pipeline, source string) (bool, error) {
	retries := e.queueFor(op).PipelineRetries
	if retries <= 0 || rules.StepCode(op.Step) != rules.HandleAwaitPipeline {
		return false, nil
	}
	q, err := e.st.GetQueue(ctx, e.st.DB(), queueKey(op), int(rules.HandleQueued), 1)
	if err != nil || q.HeadOperationID != op.ID {
		return false, err
	}
	events, err := e.st.ListEvents(ctx, e.st.DB(), op.ID)
	if err != nil {
		return false, fmt.Errorf("counting the pipeline retries of %s: %w", op.ID, err)
	}
	used := 0
	for _, ev := range events {
		var a struct {
			Action string `json:"action"`
		}
		switch {
		case ev.Type == store.EventTransition:
			used = 0
		case ev.Type == store.EventAttempt && json.Unmarshal(ev.Payload, &a) == nil && a.Action == actionPipelineRetried:
			used++
		}
	}
	if used >= retries {
		return false, nil
	}
	pl, err := e.rerunHeadPipeline(ctx, op)
	if platform.IsRefused(err) {
		return false, nil // the platform will not run it again: blame the failure
	}
	if err != nil {
		return false, err
	}
	w := rules.WordsOf(op.Platform)
	detail := fmt.Sprintf("%s failed at the head of the merge queue; running it again as %s (retry %d of %d)",
		w.PipelineRef(failed.ID), w.PipelineRef(pl.ID), used+1, retries)
	_, err = e.recordInStep(ctx, op, source,
		map[string]any{"action": actionPipelineRetried, "failed_pipeline_id": failed.ID, "pipeline_id": pl.ID, "retry": used + 1},
		func(o *store.Operation) {
			o.HeadSHA, o.PipelineID, o.PipelineURL, o.Detail = head, pl.ID, pl.WebURL, detail
		},
		e.refreshNoteJobs(op, op.Version+1))
	if isConflict(err) {
		return true, nil
	}
	if err == nil {
		e.opLog(op).Info("merge queue: the head's pipeline failed; running it again", "failed_pipeline_id", failed.ID, "pipeline_id", pl.ID)
	}
	return err == nil, err
}
