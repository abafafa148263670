package flows

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

func notApplicable(format string, args ...any) error {
	return &rules.NotApplicableError{Reason: fmt.Sprintf(format, args...)}
}

func actionOpts(p rules.ActionParams) TransitionOpts {
	return TransitionOpts{Actor: p.Actor, Source: p.Source, Payload: actionPayload(p)}
}

// actionPayload is the payload of an action's event: the command, and the
// person's reason when they gave one.
func actionPayload(p rules.ActionParams) map[string]any {
	payload := map[string]any{"command": p.Command}
	if p.Reason != "" {
		payload["reason"] = p.Reason
	}
	return payload
}

// byActor is "cancelled by <actor>" with the person's reason after a
// colon when they gave one.
func byActor(what string, p rules.ActionParams) string {
	if p.Reason == "" {
		return what + " by " + p.Actor
	}
	return what + " by " + p.Actor + ": " + p.Reason
}

// ErrUnknownAction is returned by Act for an action it does not know.
var ErrUnknownAction = errors.New("unknown action")

// Act is the one dispatch of retry, resume and cancel, shared by the MR
// commands and the REST API: it reads the operation with id now (so the
// action applies to its current state) and runs Retry, Resume or Cancel.
// Errors: store.ErrNotFound for an unknown id, a *NotApplicableError when
// the action does not apply in the change's step, ErrUnknownAction, or
// whatever the action met (GitLab, the store).
func (e *Engine) Act(ctx context.Context, id string, a rules.Action, p rules.ActionParams) (store.Operation, error) {
	op, err := e.st.GetOperation(ctx, e.st.DB(), id)
	if err != nil {
		return store.Operation{}, err
	}
	if err := e.ownPlatform(op); err != nil {
		return op, err
	}
	if p.Command == "" {
		p.Command = string(a)
	}
	switch a {
	case rules.ActionRetry:
		return e.Retry(ctx, op, p)
	case rules.ActionResume:
		return e.Resume(ctx, op, p)
	case rules.ActionCancel:
		return e.Cancel(ctx, op, p)
	}
	return op, fmt.Errorf("acting on %s: %w %q", id, ErrUnknownAction, a)
}

// Retry re-runs the failed step of op (issue 3 /retry) by moving it to its
// step's Retry target in the step table: CREATE_FAILED -> create again (a
// new pipeline for the head when its pipeline failed), HANDLE_FAILED ->
// handle again. The round counter starts over.
func (e *Engine) Retry(ctx context.Context, op store.Operation, p rules.ActionParams) (store.Operation, error) {
	s, _ := rules.Lookup(rules.StepCode(op.Step))
	if !s.Retryable() {
		return op, notApplicable("/retry applies to a failed change; this one is %s (%s)", op.Status, rules.StepCode(op.Step))
	}
	o := actionOpts(p)
	o.Update = func(x *store.Operation) { x.Rounds, x.Detail = 0, "" }
	return e.Transition(ctx, op, s.Retry, o)
}

// Resume continues op (issue 3 /resume) as its step's Resume entry in the
// step table says: a pending step goes back to its waiting step with a
// fresh deadline; an in-progress step gets its job enqueued again (steps are
// idempotent), or, while its job is still queued, that job is made due now
// instead (never a second job for the step, issue 9 defect 7).
func (e *Engine) Resume(ctx context.Context, op store.Operation, p rules.ActionParams) (store.Operation, error) {
	step := rules.StepCode(op.Step)
	s, _ := rules.Lookup(step)
	switch {
	case !s.Resumable():
		return op, notApplicable("/resume applies to a waiting or interrupted change; this one is %s (%s)", op.Status, step)
	case step == rules.ClosedByPerson:
		return e.resumeClosed(ctx, op, p)
	case s.Resume != step:
		return e.Transition(ctx, op, s.Resume, actionOpts(p))
	}
	// At most one job per (operation, step): the step's job may still be
	// queued under an older version (a retry note or a sweep bumps the
	// version), which River's uniqueness by version would not see.
	queued, err := e.st.ResumeStep(ctx, store.ResumeStepParams{OperationID: op.ID, Step: op.Step, Kinds: rules.StepJobKinds(),
		Event: store.EventParams{Type: store.EventCommand, Actor: p.Actor, Source: p.Source,
			Payload: withEntry(actionPayload(p), "resumed_step", step.String())},
		Jobs: e.followUps(op, step, op.Version, 0)})
	if err == nil {
		e.opLog(op).Info("resumed", attrStep, step.String(), "new_job", queued)
	}
	return op, err
}

// resumeClosed is /resume of a change a person stopped by closing its MR
// (MR_CLOSED, issue 10 point 1). A reopen alone moves nothing; this does,
// and only from a fresh start on the MR's current head:
//   - a newer change that took the binding meanwhile wins: refused, naming it;
//   - the MR is read: still closed is refused ("reopen !7 first"); merged
//     is recorded as merged (the change then waits for its deploy);
//   - a new MR pipeline is created on the current head and its id recorded,
//     so no pipeline result from before the close counts (pipelineFinished
//     ignores older pipelines);
//   - the reviewer robots' approvals are withdrawn in GitLab and the
//     in-GitLab approvals recorded for the change forgotten, so every
//     approval that counts is given again, for the head's sha;
//   - then CREATE_MR_OPENED (the step table's Resume): the pipeline wait,
//     then the approvals of the change's flow order, then the merge.
//
// GitLab errors other than refusals are returned (the command is retried).
func (e *Engine) resumeClosed(ctx context.Context, op store.Operation, p rules.ActionParams) (store.Operation, error) {
	if err := e.bindingTaken(ctx, op); err != nil {
		return op, err
	}
	w := rules.WordsOf(op.Platform)
	mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, false)
	switch {
	case errors.Is(err, platform.ErrNotFound):
		return op, notApplicable("%s no longer exists; submit the change again", w.MRRef(op.MRIID))
	case err != nil:
		return op, err
	case mr.State == platform.MRStateMerged:
		if err := e.finishMerged(ctx, op, mr, p.Source); err != nil && !isConflict(err) {
			return op, err
		}
		return op, notApplicable("%s was merged in %s: the change now waits for its deploy", w.Ref(op.MRIID), w.Platform)
	case mr.State != platform.MRStateOpened:
		return op, notApplicable("%s is %s: reopen %s in %s first, then comment /resume again", w.Ref(op.MRIID), mr.State, w.Ref(op.MRIID), w.Platform)
	}
	withdrawn, err := e.withdrawRobotApprovals(ctx, op)
	if err != nil {
		return op, err
	}
	pl, err := e.gl.CreateMergeRequestPipeline(ctx, op.ProjectID, op.MRIID)
	if platform.IsRefused(err) {
		return op, notApplicable("%s refused %s for %s: %s", w.Platform, w.NewRun, w.Ref(op.MRIID), failureDetail(w, err))
	}
	if err != nil {
		return op, err
	}
	o := actionOpts(p)
	o.Payload["resumed_step"] = rules.ClosedByPerson.String()
	o.Payload["head_sha"] = mr.SHA
	o.Payload["pipeline_id"] = pl.ID
	o.Payload["withdrawn_approvals"] = withdrawn
	o.Update = func(x *store.Operation) {
		x.HeadSHA, x.PipelineID, x.PipelineURL, x.Rounds = mr.SHA, pl.ID, pl.WebURL, 0
		x.Detail = fmt.Sprintf("resumed by %s after %s was reopened: waiting for the new %s of %s", p.Actor, w.Ref(op.MRIID), w.PipelineRef(pl.ID), short(mr.SHA))
	}
	o.Guard = func(ctx context.Context, tx store.Tx, _ store.Operation, _ store.Binding) error {
		_, err := e.st.ClearGitLabApprovals(ctx, tx, op.ID)
		return err
	}
	next, err := e.Transition(ctx, op, rules.MustStep(rules.ClosedByPerson).Resume, o)
	if errors.Is(err, store.ErrBindingNotOwned) {
		// A new change took the binding after the look above.
		if rerr := e.bindingTaken(ctx, op); rerr != nil {
			return op, rerr
		}
	}
	return next, err
}

// bindingTaken returns nil when op still owns its binding, a
// *NotApplicableError naming the newer change that holds it, or the
// store's error.
func (e *Engine) bindingTaken(ctx context.Context, op store.Operation) error {
	b, err := e.st.GetBinding(ctx, e.st.DB(), op.SubjectID, op.TargetKey)
	if err != nil {
		return err
	}
	if b.OperationID == op.ID {
		return nil
	}
	return notApplicable("a newer change, %s (%s), took over %s/%s after the close: this one cannot be resumed; follow the newer change instead",
		b.OperationID, b.Status, op.SubjectID, op.TargetKey)
}

// withdrawRobotApprovals withdraws, in GitLab, the approvals the reviewer
// robots gave op's MR (they may carry an older head's sha) and returns how
// many; a reviewer GitLab says had not approved (404) counts as done.
func (e *Engine) withdrawRobotApprovals(ctx context.Context, op store.Operation) (int, error) {
	approved, err := e.readApprovals(ctx, op)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range e.gl.ReviewerCount() {
		u, err := e.gl.Reviewer(ctx, i)
		if err != nil {
			return n, err
		}
		if !approved[u.ID] {
			continue
		}
		if err := e.gl.Unapprove(ctx, i, op.ProjectID, op.MRIID); err != nil && !errors.Is(err, platform.ErrNotFound) {
			return n, err
		}
		n++
	}
	return n, nil
}

// Cancel closes the change (issue 3 /cancel): closes its MR unless GitLab
// shows it closed or merged already, then CLOSED (re-appliable). A change
// GitLab shows merged is finished as MERGED instead: the configuration is on
// the target branch, so it cannot honestly be called cancelled.
//
// A change recorded MERGED (HANDLE_MERGED, DEPLOY_PENDING) whose merge
// request GitLab says is not merged was moved there on a merge webhook
// believed without asking GitLab (before applyStateHook checked it): no
// deploy can ever confirm it and it holds its binding. Cancel reads the MR
// and, when GitLab says it is opened or closed, closes it like any other
// change, saying so in the detail; a change GitLab shows merged stays as it
// is (409).
func (e *Engine) Cancel(ctx context.Context, op store.Operation, p rules.ActionParams) (store.Operation, error) {
	if s, _ := rules.Lookup(rules.StepCode(op.Step)); !s.Cancellable() {
		if s.RecordedMerged() && op.MRIID > 0 {
			return e.cancelUnmerged(ctx, op, p)
		}
		return op, notApplicable("/cancel applies to a change in progress; this one is %s (%s)", op.Status, rules.StepCode(op.Step))
	}
	if op.MRIID > 0 {
		mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, false)
		if err != nil && !errors.Is(err, platform.ErrNotFound) {
			return op, err
		}
		switch {
		case err == nil && mr.State == platform.MRStateMerged:
			if ferr := e.finishMerged(ctx, op, mr, p.Source); ferr != nil {
				return op, ferr
			}
			return op, notApplicable("%s is already merged; the change can no longer be cancelled", rules.WordsOf(op.Platform).Ref(op.MRIID))
		case err == nil && mr.State != platform.MRStateClosed && !op.Adopted:
			// An adopted change's merge request is the developer's: it
			// stays open (issue 25 point 4).
			if _, err := e.gl.CloseMergeRequest(ctx, op.ProjectID, op.MRIID); err != nil {
				return op, err
			}
		}
	}
	o := actionOpts(p)
	if op.MRIID == 0 && rules.MustStep(rules.StepCode(op.Step)).Phase == rules.PhaseCreate {
		// The create job may have opened a branch and a merge request it
		// has not recorded yet (it failed, or was interrupted): close them
		// too (issue 9 defect 6). A job still running finds the change
		// CLOSED when it tries to record them, and cleans up itself.
		done, err := e.closeUnrecorded(ctx, op)
		if err != nil {
			return op, err
		}
		maps.Copy(o.Payload, done)
		// What a create attempt racing this cancel opens after the look
		// above is closed by a cleanup job due once no attempt can still
		// be running.
		o.Jobs = append(o.Jobs, e.cancelCleanupJob(op))
	}
	o.Update = func(x *store.Operation) { x.Detail = byActor("cancelled", p) }
	if op.Adopted {
		o.Payload["let_go"] = true
		o.Update = func(x *store.Operation) { x.Detail = byActor(letGoDetail(op.Platform), p) }
	}
	return e.Transition(ctx, op, rules.Closed, o)
}

// cancelUnmerged is Cancel of a change recorded merged (Step.RecordedMerged):
// allowed only when GitLab, read now, says its merge request is not merged.
func (e *Engine) cancelUnmerged(ctx context.Context, op store.Operation, p rules.ActionParams) (store.Operation, error) {
	w := rules.WordsOf(op.Platform)
	mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, false)
	if err != nil {
		return op, fmt.Errorf("reading %s to cancel a change recorded merged: %w", w.MRRef(op.MRIID), err)
	}
	if mr.State == platform.MRStateMerged {
		return op, notApplicable("%s is merged; the change can no longer be cancelled", w.Ref(op.MRIID))
	}
	state := mr.State
	if mr.State != platform.MRStateClosed && !op.Adopted {
		if _, err := e.gl.CloseMergeRequest(ctx, op.ProjectID, op.MRIID); err != nil {
			return op, err
		}
	}
	o := actionOpts(p)
	o.Payload["mr_state"] = state
	o.Update = func(x *store.Operation) {
		x.Detail = fmt.Sprintf("%s; %s says %s was never merged (%s), though the change was recorded merged",
			byActor("cancelled", p), w.Platform, w.MRRef(op.MRIID), state)
	}
	return e.Transition(ctx, op, rules.Closed, o)
}

// withEntry is m with key set to v.
func withEntry(m map[string]any, key string, v any) map[string]any {
	m[key] = v
	return m
}

// Refuse records a refused command in the change's history (actor,
// command, reason) and changes nothing else.
func (e *Engine) Refuse(ctx context.Context, op store.Operation, p rules.ActionParams, reason string) error {
	_, err := e.st.AppendEvent(ctx, op.ID, store.EventParams{Type: store.EventRefused, Actor: p.Actor, Source: p.Source,
		Payload: map[string]any{"command": p.Command, "reason": reason}})
	return err
}

// RefreshNow re-renders op's status comment at once (/status), recreating
// it if someone deleted it. While another refresh is writing the note it
// leaves the note to that one, which shows the newest state.
func (e *Engine) RefreshNow(ctx context.Context, op store.Operation) error {
	if err := e.refreshNote(ctx, op.ID, true); !errors.Is(err, ErrNoteBusy) {
		return err
	}
	return nil
}

// Reply posts a comment on an MR as the robot.
func (e *Engine) Reply(ctx context.Context, projectID, iid int64, body string) error {
	_, err := e.gl.CreateNote(ctx, projectID, iid, body)
	return err
}

// FindByMR returns the newest change of an MR (a pull request on GitHub)
// of the engine's platform; store.ErrNotFound when none.
func (e *Engine) FindByMR(ctx context.Context, projectID, iid int64) (store.Operation, error) {
	return e.st.FindOperationByMR(ctx, e.st.DB(), e.platform, projectID, iid)
}
