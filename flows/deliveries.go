package flows

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"changebot/platform"
	"changebot/store"
)

// Delivery outcomes recorded on webhook_deliveries.outcome.
const (
	OutcomeApplied   = "applied"
	OutcomeNoChange  = "no_change"
	OutcomeUnrelated = "unrelated"
	OutcomeIgnored   = "ignored"
)

// ApplyHook applies one decoded webhook of the flow: pipeline and merge
// request events (comments are the command layer's, routed there by the
// delivery router above flows; here they are OutcomeIgnored). deliveryID
// names the stored delivery in the event's source. Webhooks only speed
// things up: every wait also polls, so an event that does not fit is
// dropped safely. It returns the outcome to record on the delivery.
func (e *Engine) ApplyHook(ctx context.Context, deliveryID int64, ev platform.HookEvent) (string, error) {
	source := fmt.Sprintf("%s:%d", SourceWebhook, deliveryID)
	if p := ev.Pipeline; p != nil && p.MRIID == 0 && p.Partial {
		if iid := e.requestOfBranch(ctx, ev.ProjectID, p.Ref); iid > 0 {
			// A check of a change's source branch whose payload names no
			// pull request (a GitHub commit status): the change's.
			hook := *p
			hook.MRIID = iid
			ev.Pipeline = &hook
		}
	}
	switch {
	case ev.Pipeline != nil && ev.Pipeline.MRIID > 0:
		return e.applyMRPipeline(ctx, ev, source)
	case ev.Pipeline != nil:
		return e.applyBranchPipeline(ctx, ev, source)
	case ev.MergeRequest != nil:
		return e.applyMergeRequestHook(ctx, ev, source)
	}
	return OutcomeIgnored, nil
}

// requestOfBranch returns the merge request iid of the change whose
// source branch is branch (the engine's prefix and the operation id) in
// project projectID on this platform, 0 when branch is no change's or the
// change has no merge request yet. One read of the operation.
func (e *Engine) requestOfBranch(ctx context.Context, projectID int64, branch string) int64 {
	id, ok := strings.CutPrefix(branch, e.prefix)
	if !ok || id == "" {
		return 0
	}
	op, err := e.st.GetOperation(ctx, e.st.DB(), id)
	if err != nil || op.ProjectID != projectID || op.Platform != e.platform || op.SourceBranch != branch {
		return 0
	}
	return op.MRIID
}

func (e *Engine) applyMRPipeline(ctx context.Context, ev platform.HookEvent, source string) (string, error) {
	p := ev.Pipeline
	op, err := e.st.FindOperationByMR(ctx, e.st.DB(), e.platform, ev.ProjectID, p.MRIID)
	if errors.Is(err, store.ErrNotFound) {
		return OutcomeUnrelated, nil
	}
	if err != nil {
		return "", err
	}
	pipe := platform.Pipeline{ID: p.ID, SHA: p.SHA, Ref: p.Ref, Status: p.Status, WebURL: p.WebURL, Source: p.Source}
	waiting := waitsForPerson(wordsOf(op.Platform), pipe.Status)
	if !waitsForPipeline(StepCode(op.Step)) || (!pipe.Finished() && (waiting == "" || op.Detail == waiting)) {
		e.postponePoll(ctx, op)
		return OutcomeNoChange, nil
	}
	if p.Partial && (op.HeadSHA == "" || p.SHA != op.HeadSHA) {
		// One check of another sha (an old head's late check): it says
		// nothing of the head's CI state and costs no read.
		e.postponePoll(ctx, op)
		return OutcomeNoChange, nil
	}
	// Only the MR can tell whether this is the pipeline of its current
	// head: a merged-results pipeline runs on another sha, and a late
	// pipeline of an old head carries the sha we last saw while the head
	// has moved on (issue 4 point 4). One read per finished MR pipeline, and
	// per pipeline that starts waiting for a person (issue 10 point 8); on
	// GitHub one per finished check of the head sha.
	mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, false)
	if err != nil {
		return "", err
	}
	switch mr.State {
	case platform.MRStateMerged:
		if err := e.finishMerged(ctx, op, mr, source); err != nil && !isConflict(err) {
			return "", err
		}
		return OutcomeApplied, nil
	case platform.MRStateClosed:
		// A person closed it: the pipeline no longer matters (issue 10
		// point 1).
		if err := e.closedByPerson(ctx, op, mr.ClosedBy.Username, source); err != nil {
			return "", err
		}
		return OutcomeApplied, nil
	}
	hp := headPipeline(mr)
	if p.Partial && hp != nil {
		// One check of the head finished (or waits for a person): decide
		// on the head's CI state as a whole, the pipeline the read
		// synthesized from every check run and status of the head and the
		// required contexts (platform.PipelineHook.Partial), as the
		// await_pipeline poll would. Still running: the other checks'
		// webhooks will come, so the poll waits.
		pipe = *hp
		waiting = waitsForPerson(wordsOf(op.Platform), pipe.Status)
		if !pipe.Finished() && (waiting == "" || op.Detail == waiting) {
			e.postponePoll(ctx, op)
			return OutcomeNoChange, nil
		}
	}
	if hp == nil || hp.ID != pipe.ID {
		return OutcomeNoChange, nil
	}
	if !pipe.Finished() {
		e.notePersonWait(ctx, op, pipe, waiting, source)
		return OutcomeApplied, nil
	}
	head := mr.SHA
	if err := e.pipelineFinished(ctx, op, head, pipe, source); err != nil && !isConflict(err) {
		return "", err
	}
	return OutcomeApplied, nil
}

// maxHookAncestryChecks bounds the merge_base calls one branch pipeline
// webhook makes when the compare answer cannot settle a change (see
// branchContains); changes left over are found by the deploy poll and the
// reconciler.
const maxHookAncestryChecks = 20

// applyBranchPipeline handles a pipeline on a branch: a successful one on a
// change's target branch at its merge commit, or at a later commit that
// contains the merge commit (GitLab cancels redundant pipelines, so the
// merge commit's own pipeline may never succeed), confirms that the change
// is applied. It costs at most one GitLab call however many changes of the
// project are merged and waiting (issue 12 point 3): the changes at the
// pipeline's sha need none, the others are settled together by one compare
// of the pipeline's sha with the branch (branchContains). An error there is
// returned after the exact matches were flipped, so the delivery is retried.
func (e *Engine) applyBranchPipeline(ctx context.Context, ev platform.HookEvent, source string) (string, error) {
	p := ev.Pipeline
	if p.Status != platform.PipelineSuccess || p.Tag {
		return OutcomeNoChange, nil
	}
	ops, err := e.st.ListMergedByProject(ctx, e.st.DB(), e.platform, ev.ProjectID, 500)
	if err != nil {
		return "", err
	}
	outcome := OutcomeUnrelated
	flip := func(op store.Operation, rule string) error {
		flipped, err := e.MarkValidated(ctx, op.ID, source, e.platform, map[string]any{"pipeline_id": p.ID, "sha": p.SHA, "rule": rule})
		if flipped {
			outcome = OutcomeApplied
		}
		return err
	}
	var later []store.Operation
	for _, op := range ops {
		switch {
		case op.TargetBranch != p.Ref:
		case op.MergeCommitSHA == p.SHA:
			if err := flip(op, ruleExact); err != nil {
				return "", err
			}
		default:
			later = append(later, op)
		}
	}
	if len(later) == 0 {
		return outcome, nil
	}
	contained, err := e.branchContains(ctx, ev.ProjectID, p.Ref, p.SHA, later)
	for _, op := range contained {
		if err := flip(op, ruleContains); err != nil {
			return "", err
		}
	}
	if err != nil {
		return "", err
	}
	return outcome, nil
}

// applyMergeRequestHook handles MR events: a merge done outside the bot (or
// whose answer we lost) finishes the change as merged, naming who merged it
// (the hook's user); a close by a person ends it in MR_CLOSED.
func (e *Engine) applyMergeRequestHook(ctx context.Context, ev platform.HookEvent, source string) (string, error) {
	h := ev.MergeRequest
	switch {
	case h.Action == "merge", h.Action == "close", h.Action == "approved", h.Action == "approval", h.Action == "unapproved", h.Action == "unapproval":
	case h.Action == "update" && h.DraftChanged && !h.Draft:
	default:
		return OutcomeNoChange, nil
	}
	op, err := e.st.FindOperationByMR(ctx, e.st.DB(), e.platform, ev.ProjectID, h.IID)
	if errors.Is(err, store.ErrNotFound) {
		return OutcomeUnrelated, nil
	}
	if err != nil {
		return "", err
	}
	if h.Action == "close" {
		if !CanMove(StepCode(op.Step), ClosedByPerson) {
			return OutcomeNoChange, nil
		}
		if err := e.closedByPerson(ctx, op, ev.User.Username, source); err != nil {
			return "", err
		}
		return OutcomeApplied, nil
	}
	if h.Action == "update" {
		return e.applyReadyHook(ctx, op, source)
	}
	if h.Action != "merge" {
		return e.applyApprovalHook(ctx, op, ev, source)
	}
	if !CanMove(StepCode(op.Step), HandleMerged) {
		return OutcomeNoChange, nil
	}
	mr := platform.MergeRequest{IID: h.IID, SHA: h.SHA, MergeCommitSHA: h.MergeCommitSHA, State: platform.MRStateMerged, MergedBy: ev.User}
	if err := e.finishMerged(ctx, op, mr, source); err != nil && !isConflict(err) {
		return "", err
	}
	return OutcomeApplied, nil
}

// applyReadyHook applies a Merge Request Hook that marked the MR ready
// (changes.draft true -> false): a change waiting in HANDLE_DRAFT goes back
// to merging at once; anywhere else nothing changes (issue 10 point 3).
func (e *Engine) applyReadyHook(ctx context.Context, op store.Operation, source string) (string, error) {
	if StepCode(op.Step) != HandleDraft {
		return OutcomeNoChange, nil
	}
	if err := e.draftReady(ctx, op, source); err != nil {
		if isConflict(err) {
			return OutcomeNoChange, nil
		}
		return "", err
	}
	return OutcomeApplied, nil
}

// postponePoll pushes the next poll of op's pipeline wait out by the short
// poll interval from now: a pipeline webhook for its merge request arrived,
// so webhooks are flowing and the poll, their fallback, can wait (issue 12
// point 4: polling stops while webhooks arrive). One statement; a failure
// is logged (the poll runs on its own schedule).
func (e *Engine) postponePoll(ctx context.Context, op store.Operation) {
	if !waitsForPipeline(StepCode(op.Step)) {
		return
	}
	until := e.now().Add(e.pollFor(op).ShortInterval)
	if _, err := e.st.PostponeStepJobs(ctx, e.st.DB(), op.ID, op.Step, []string{KindAwaitPipeline}, until); err != nil {
		e.opLog(op).Warn("postponing the poll after a webhook failed", "err", err)
	}
}
