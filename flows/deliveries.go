package flows

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/riverqueue/river"

	"changebot/platform"
	"changebot/store"
)

// HookDecoder decodes a stored webhook body (the bot's one decoding path,
// platform/gitlab.DecodeHook).
type HookDecoder func(event string, body []byte) (platform.HookEvent, error)

// NoteHandler runs the commands of an MR comment (implemented by the
// command layer and wired by bot). It is optional.
type NoteHandler interface {
	HandleNote(ctx context.Context, deliveryID int64, ev platform.HookEvent) (outcome string, err error)
}

// Delivery outcomes recorded on webhook_deliveries.outcome.
const (
	OutcomeApplied   = "applied"
	OutcomeNoChange  = "no_change"
	OutcomeUnrelated = "unrelated"
	OutcomeIgnored   = "ignored"
)

type deliveryWorker struct {
	river.WorkerDefaults[ProcessDeliveryArgs]
	e *Engine
}

// Work implements river.Worker: decode the stored delivery and apply it.
func (w *deliveryWorker) Work(ctx context.Context, job *river.Job[ProcessDeliveryArgs]) (err error) {
	e := w.e
	log := e.log.With(attrDeliveryID, job.Args.DeliveryID, attrJobKind, KindProcessDelivery)
	defer func() {
		if r := recover(); r != nil {
			e.m.panics.WithLabelValues(KindProcessDelivery).Inc()
			log.Error("processing delivery panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("processing delivery %d: panic: %v", job.Args.DeliveryID, r)
		}
	}()
	d, err := e.st.GetDelivery(ctx, e.st.Pool(), job.Args.DeliveryID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if e.cfg.DecodeHook == nil {
		return errors.New("no webhook decoder configured")
	}
	ev, err := e.cfg.DecodeHook(d.Event, d.Body)
	if err != nil {
		log.Error("stored delivery does not decode", "err", err)
		return e.st.MarkDeliveryProcessed(ctx, e.st.Pool(), d.ID, "undecodable")
	}
	outcome, err := e.applyHook(ctx, d.ID, ev)
	if err != nil {
		return fmt.Errorf("applying delivery %d: %w", d.ID, err)
	}
	log.Debug("delivery processed", "outcome", outcome, "event", d.Event)
	return e.st.MarkDeliveryProcessed(ctx, e.st.Pool(), d.ID, outcome)
}

// applyHook applies one decoded webhook. Webhooks only speed things up:
// every wait also polls, so an event that does not fit is dropped safely.
func (e *Engine) applyHook(ctx context.Context, deliveryID int64, ev platform.HookEvent) (string, error) {
	source := fmt.Sprintf("%s:%d", SourceWebhook, deliveryID)
	switch {
	case ev.Pipeline != nil && ev.Pipeline.MRIID > 0:
		return e.applyMRPipeline(ctx, ev, source)
	case ev.Pipeline != nil:
		return e.applyBranchPipeline(ctx, ev, source)
	case ev.MergeRequest != nil:
		return e.applyMergeRequestHook(ctx, ev, source)
	case ev.Note != nil && e.cfg.Notes != nil:
		return e.cfg.Notes.HandleNote(ctx, deliveryID, ev)
	}
	return OutcomeIgnored, nil
}

func (e *Engine) applyMRPipeline(ctx context.Context, ev platform.HookEvent, source string) (string, error) {
	p := ev.Pipeline
	op, err := e.st.FindOperationByMR(ctx, e.st.Pool(), ev.ProjectID, p.MRIID)
	if errors.Is(err, store.ErrNotFound) {
		return OutcomeUnrelated, nil
	}
	if err != nil {
		return "", err
	}
	pipe := platform.Pipeline{ID: p.ID, SHA: p.SHA, Ref: p.Ref, Status: p.Status, WebURL: p.WebURL, Source: p.Source}
	if !waitsForPipeline(StepCode(op.Step)) || !pipe.Finished() {
		return OutcomeNoChange, nil
	}
	// Only the MR can tell whether this is the pipeline of its current
	// head: a merged-results pipeline runs on another sha, and a late
	// pipeline of an old head carries the sha we last saw while the head
	// has moved on (issue 4 point 4). One read per finished MR pipeline.
	mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, false)
	if err != nil {
		return "", err
	}
	hp := headPipeline(mr)
	if hp == nil || hp.ID != p.ID {
		return OutcomeNoChange, nil
	}
	head := mr.SHA
	if err := e.pipelineFinished(ctx, op, head, pipe, source); err != nil && !isConflict(err) {
		return "", err
	}
	return OutcomeApplied, nil
}

// maxHookAncestryChecks bounds the merge_base calls one branch pipeline
// webhook makes; changes left over are found by the reconciler.
const maxHookAncestryChecks = 20

// applyBranchPipeline handles a pipeline on a branch: a successful one on a
// change's target branch at its merge commit, or at a later commit that
// contains the merge commit (GitLab cancels redundant pipelines, so the
// merge commit's own pipeline may never succeed), confirms that the change
// is applied. Ancestry is asked of GitLab (merge_base) for at most
// maxHookAncestryChecks changes per webhook; an error there is returned
// after every other change was handled, so the delivery is retried.
func (e *Engine) applyBranchPipeline(ctx context.Context, ev platform.HookEvent, source string) (string, error) {
	p := ev.Pipeline
	if p.Status != platform.PipelineSuccess || p.Tag {
		return OutcomeNoChange, nil
	}
	ops, err := e.st.ListMergedByProject(ctx, e.st.Pool(), ev.ProjectID, 500)
	if err != nil {
		return "", err
	}
	outcome := OutcomeUnrelated
	checks := 0
	var firstErr error
	for _, op := range ops {
		if op.TargetBranch != p.Ref {
			continue
		}
		rule := ruleExact
		if op.MergeCommitSHA != p.SHA {
			if checks >= maxHookAncestryChecks {
				continue
			}
			checks++
			ok, err := e.gl.IsAncestor(ctx, ev.ProjectID, op.MergeCommitSHA, p.SHA)
			if err != nil {
				firstErr = cmp.Or(firstErr, err)
				continue
			}
			if !ok {
				continue
			}
			rule = ruleContains
		}
		flipped, err := e.MarkValidated(ctx, op.ID, source, "gitlab", map[string]any{"pipeline_id": p.ID, "sha": p.SHA, "rule": rule})
		if err != nil {
			return "", err
		}
		if flipped {
			outcome = OutcomeApplied
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return outcome, nil
}

// applyMergeRequestHook handles MR events: a merge done outside the bot (or
// whose answer we lost) finishes the change as merged.
func (e *Engine) applyMergeRequestHook(ctx context.Context, ev platform.HookEvent, source string) (string, error) {
	h := ev.MergeRequest
	switch h.Action {
	case "merge", "approved", "approval", "unapproved", "unapproval":
	default:
		return OutcomeNoChange, nil
	}
	op, err := e.st.FindOperationByMR(ctx, e.st.Pool(), ev.ProjectID, h.IID)
	if errors.Is(err, store.ErrNotFound) {
		return OutcomeUnrelated, nil
	}
	if err != nil {
		return "", err
	}
	if h.Action != "merge" {
		return e.applyApprovalHook(ctx, op, ev, source)
	}
	if !CanMove(StepCode(op.Step), HandleMerged) {
		return OutcomeNoChange, nil
	}
	mr := platform.MergeRequest{IID: h.IID, SHA: h.SHA, MergeCommitSHA: h.MergeCommitSHA, State: platform.MRStateMerged}
	if err := e.finishMerged(ctx, op, mr, source); err != nil && !isConflict(err) {
		return "", err
	}
	return OutcomeApplied, nil
}
