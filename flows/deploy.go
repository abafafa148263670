package flows

import (
	"context"
	"errors"
	"fmt"

	"changebot/platform"
	"changebot/store"
)

// Sources of a MERGED -> VALIDATED flip (label of changebot_validated_total).
const (
	SourceWebhook  = "webhook"
	SourceCallback = "callback"
	SourcePoll     = "poll"
)

// MarkValidated flips op from MERGED to VALIDATED (DESIGN §3 step 7). It
// locks operation then binding (ApplyTransition's fixed order), flips only
// from a MERGED step, is a no-op otherwise, and reports whether it flipped.
// The metric moves after the commit and only for a real flip.
func (e *Engine) MarkValidated(ctx context.Context, opID, source, actor string, payload map[string]any) (bool, error) {
	op, err := e.st.GetOperation(ctx, e.st.Pool(), opID)
	if err != nil {
		return false, err
	}
	if op.Status != store.StatusMerged {
		return false, nil
	}
	_, err = e.Transition(ctx, op, CalledBack, TransitionOpts{Actor: actor, Source: source, Payload: payload,
		IgnoreVersion: true, Update: func(o *store.Operation) { o.Detail = "" }})
	if isConflict(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	e.m.validated.WithLabelValues(sourceLabel(source)).Inc()
	return true, nil
}

func sourceLabel(source string) string {
	for _, s := range []string{SourceWebhook, SourceCallback, SourcePoll} {
		if len(source) >= len(s) && source[:len(s)] == s {
			return s
		}
	}
	if len(source) > 4 && source[:4] == "job:" {
		return SourcePoll
	}
	return "other"
}

// awaitDeploy is the polling fallback of the deploy pipeline webhook: a
// successful pipeline on the target branch at the merge commit.
func (e *Engine) awaitDeploy(ctx context.Context, op store.Operation) error {
	if StepCode(op.Step) == DeployPending {
		return nil
	}
	pipes, err := e.gl.Pipelines(ctx, op.ProjectID, op.TargetBranch, op.MergeCommitSHA)
	if err != nil {
		return err
	}
	for _, p := range pipes {
		if p.Status == platform.PipelineSuccess {
			_, err := e.MarkValidated(ctx, op.ID, SourcePoll, ActorBot, map[string]any{"pipeline_id": p.ID, "sha": p.SHA})
			return err
		}
	}
	if d, ok := e.nextPoll(op.StepStartedAt, e.poll.DeployDeadline); ok {
		return snoozeFor(d)
	}
	_, err = e.Transition(ctx, op, DeployPending, TransitionOpts{Source: "job:" + KindAwaitDeploy,
		Update: func(o *store.Operation) {
			o.Detail = fmt.Sprintf("no successful deploy pipeline for %s after %s", short(op.MergeCommitSHA), e.poll.DeployDeadline)
		}})
	return err
}

// DeployCallback is a deploy system's "this merge is applied".
type DeployCallback struct {
	RequestID      string
	ProjectID      int64
	MRIID          int64
	MergeCommitSHA string
	Status         string
}

// AcceptDeploy applies a deploy callback: status "success" (or "applied")
// flips the MR's MERGED change to VALIDATED. Deduplicated on RequestID.
func (e *Engine) AcceptDeploy(ctx context.Context, cb DeployCallback) (string, error) {
	if _, err := e.st.CallbackResult(ctx, e.st.Pool(), cb.RequestID); err == nil {
		return ResultDuplicate, nil
	}
	op, err := e.st.FindOperationByMR(ctx, e.st.Pool(), cb.ProjectID, cb.MRIID)
	result := ResultIgnoredStale
	switch {
	case errors.Is(err, store.ErrNotFound):
		result = ResultIgnoredUnknown
	case err != nil:
		return "", err
	case cb.MergeCommitSHA != "" && op.MergeCommitSHA != "" && cb.MergeCommitSHA != op.MergeCommitSHA:
		result = ResultIgnoredStale
	case cb.Status == "success" || cb.Status == "applied":
		flipped, err := e.MarkValidated(ctx, op.ID, SourceCallback+":"+cb.RequestID, "deploy", map[string]any{"mr_iid": cb.MRIID})
		if err != nil {
			return "", err
		}
		if flipped {
			result = ResultAccepted
		}
	}
	opID := ""
	if err == nil {
		opID = op.ID
	}
	if err := e.st.InsertCallbackRequest(ctx, e.st.Pool(), cb.RequestID, "deploy", opID, result); errors.Is(err, store.ErrDuplicate) {
		return ResultDuplicate, nil
	} else if err != nil {
		return "", err
	}
	return result, nil
}
