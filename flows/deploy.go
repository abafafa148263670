package flows

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"changebot/flows/commitgate"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

// Sources of a MERGED -> VALIDATED flip (label of changebot_validated_total).
const (
	SourceWebhook    = "webhook"
	SourceCallback   = "callback"
	SourcePoll       = "poll"
	SourceReconciler = "reconciler"
)

// ActorReconciler is recorded on the events the reconciler writes.
const ActorReconciler = "reconciler"

// validatedStep names the validated flip in the commit gate: the claim
// (operation id, "CALLED_BACK") is taken in the flip's own transaction.
var validatedStep = rules.CalledBack.String()

// markValidatedAttempts bounds the re-reads when the operation moves between
// its two MERGED steps (HANDLE_MERGED <-> DEPLOY_PENDING) during a flip.
const markValidatedAttempts = 3

// MarkValidated flips op from MERGED to VALIDATED (DESIGN §3 step 7): the
// deploy pipeline webhook, the deploy callback, the deploy poll and the
// reconciler all come here. It locks operation then binding
// (ApplyTransition's fixed order), flips only from a MERGED step, is a no-op
// otherwise, and reports whether it flipped. The metric moves after the
// commit and only for a real flip.
//
// Exactly once per operation: ApplyTransition re-checks the step under the
// row lock, so of several concurrent callers one moves MERGED -> CALLED_BACK
// (terminal) and the others find the step changed. On top of that the flip
// claims (operation, CALLED_BACK) in the commit gate inside the same
// transaction: the claim and the state commit or roll back together, and
// the durable claim names the source that won, for audits and for any
// future path that could leave CALLED_BACK.
func (e *Engine) MarkValidated(ctx context.Context, opID, source, actor string, payload map[string]any) (bool, error) {
	for range markValidatedAttempts {
		op, err := e.st.GetOperation(ctx, e.st.DB(), opID)
		if err != nil {
			return false, err
		}
		if op.Status != store.StatusMerged {
			return false, nil
		}
		_, err = e.Transition(ctx, op, rules.CalledBack, TransitionOpts{Actor: actor, Source: source, Payload: payload,
			IgnoreVersion: true,
			Guard: func(ctx context.Context, tx store.Tx, cur store.Operation, _ store.Binding) error {
				g := commitgate.NewGuardWithStore(commitgate.NewDBStore(e.st, tx), nil)
				_, err := g.Acquire(ctx, commitgate.Commit{Ref: commitgate.Ref{RunID: cur.ID, Step: validatedStep},
					Status: store.StatusValidated, Branch: cur.TargetBranch, Seq: cur.Version + 1})
				return err
			}})
		switch {
		case err == nil:
			e.m.validated.WithLabelValues(sourceLabel(source)).Inc()
			return true, nil
		case errors.Is(err, store.ErrStepMismatch):
			continue // moved between MERGED steps, or flipped: re-read and decide again
		case errors.Is(err, commitgate.ErrAlreadyCommitted), isConflict(err):
			return false, nil
		default:
			return false, err
		}
	}
	return false, nil
}

func sourceLabel(source string) string {
	for _, s := range []string{SourceWebhook, SourceCallback, SourcePoll, SourceReconciler} {
		if strings.HasPrefix(source, s) {
			return s
		}
	}
	if strings.HasPrefix(source, "job:") {
		return SourcePoll
	}
	return "other"
}

// awaitDeploy is the polling fallback of the deploy pipeline webhook: a
// successful pipeline on the target branch at the merge commit, or at a
// later commit that contains it (GitLab cancels redundant pipelines, so the
// merge commit's own pipeline may never succeed). One pipelines list per
// poll; one ancestry check only when the merge commit's own pipeline is
// absent or finished without success.
func (e deployWorker) awaitDeploy(ctx context.Context, op store.Operation) error {
	pipes, err := e.gl.Pipelines(ctx, op.ProjectID, op.TargetBranch, "")
	if err != nil {
		return err
	}
	if p, rule, err := e.deployEvidence(ctx, op, pipes, true); err != nil {
		return err
	} else if rule != "" {
		_, err := e.MarkValidated(ctx, op.ID, SourcePoll, ActorBot, map[string]any{"pipeline_id": p.ID, "sha": p.SHA, "rule": rule})
		return err
	}
	p := e.pollFor(op) // deploy.deadline as it is now
	if d, ok := stepped(p, e.now(), op.StepStartedAt, p.DeployDeadline); ok {
		return snoozeFor(d)
	}
	_, err = e.Transition(ctx, op, rules.DeployPending, TransitionOpts{Source: "job:" + rules.KindAwaitDeploy,
		Update: func(o *store.Operation) {
			o.Detail = fmt.Sprintf("no successful %s for %s after %s", rules.WordsOf(op.Platform).Deploy, short(op.MergeCommitSHA), p.DeployDeadline)
		}})
	return err
}

// Deploy evidence rules (recorded in the flip's event payload).
const (
	ruleExact     = "exact"     // a successful pipeline at the merge commit
	ruleContains  = "contains"  // a successful pipeline at a later commit containing it
	ruleWatermark = "watermark" // a deploy callback for a later MR of the project
)

// deployEvidence looks for a successful pipeline in pipes (newest first, of
// op's target branch) that deploys op's merge commit: exactly, or at a later
// commit that contains it (one IsAncestor call, against the newest
// successful pipeline: on a branch that only moves forward it contains every
// earlier one). With waitOwn, the ancestry check is skipped while the merge
// commit's own pipeline is still running. rule is "" when there is none.
func (e *Engine) deployEvidence(ctx context.Context, op store.Operation, pipes []platform.Pipeline, waitOwn bool) (platform.Pipeline, string, error) {
	var own, newest *platform.Pipeline
	for i := range pipes {
		p := &pipes[i]
		if p.SHA == op.MergeCommitSHA && own == nil {
			own = p
		}
		if p.Status == platform.PipelineSuccess {
			if p.SHA == op.MergeCommitSHA {
				return *p, ruleExact, nil
			}
			if newest == nil {
				newest = p
			}
		}
	}
	if newest == nil || (waitOwn && own != nil && !own.Finished()) {
		return platform.Pipeline{}, "", nil
	}
	ok, err := e.gl.IsAncestor(ctx, op.ProjectID, op.MergeCommitSHA, newest.SHA)
	if err != nil || !ok {
		return platform.Pipeline{}, "", err
	}
	return *newest, ruleContains, nil
}

// branchContains returns the ops (merged into branch, merge commit set)
// whose merge commit the commit sha of branch contains. One GitLab call
// settles them all: GET repository/compare?from=sha&to=branch lists the
// commits of branch after sha (oldest first, the branch's head last), and
// a merge commit of branch that is not among them is an ancestor of sha; a
// target branch only moves forward (the rule deployEvidence also relies
// on). The answer is trusted only when it is complete: the first parents
// from its last commit lead back to sha through listed commits. GitLab
// answers authenticated callers in full, but caps the commits of a compare
// at 100 (the newest) on the web page and, behind a feature flag, for
// anonymous API callers (gitlab-org/gitlab!268855); an answer that is not
// complete, or a sha no longer on the branch's first-parent line, leaves
// the changes it does not list to merge_base, at most
// maxHookAncestryChecks of them. A sha or branch GitLab no longer has
// settles nothing (no error: the deploy poll and the reconciler look
// again). On an error ops settled so far are returned with it.
func (e *Engine) branchContains(ctx context.Context, projectID int64, branch, sha string, ops []store.Operation) ([]store.Operation, error) {
	commits, err := e.gl.BranchCommits(ctx, projectID, sha, branch)
	if errors.Is(err, platform.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the commits of %s after %s: %w", branch, short(sha), err)
	}
	after := make(map[string]bool, len(commits))
	for _, c := range commits {
		after[c.SHA] = true
	}
	complete := completeAfter(commits, sha)
	var out []store.Operation
	checks := 0
	for _, op := range ops {
		switch {
		case after[op.MergeCommitSHA]:
			continue // merged after sha
		case complete:
			out = append(out, op)
			continue
		case checks >= maxHookAncestryChecks:
			continue
		}
		checks++
		ok, err := e.gl.IsAncestor(ctx, projectID, op.MergeCommitSHA, sha)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, op)
		}
	}
	return out, nil
}

// completeAfter reports whether commits, a compare answer from sha (oldest
// first), holds every commit of the branch's first-parent line after sha:
// an empty answer, or first parents that lead from its last commit back to
// sha through listed commits.
func completeAfter(commits []platform.Commit, sha string) bool {
	if len(commits) == 0 {
		return true
	}
	firstParent := make(map[string]string, len(commits))
	for _, c := range commits {
		if len(c.ParentIDs) > 0 {
			firstParent[c.SHA] = c.ParentIDs[0]
		}
	}
	c := commits[len(commits)-1].SHA
	for range commits {
		p, ok := firstParent[c]
		switch {
		case !ok:
			return false
		case p == sha:
			return true
		}
		c = p
	}
	return false
}

// Kinds of callback_requests rows; request ids are deduplicated per kind.
const (
	// callbackKindDeploy marks deploy callbacks; the reconciler's watermark
	// rule reads the accepted ones.
	callbackKindDeploy = "deploy"
	// callbackKindApproval marks approval system callbacks.
	callbackKindApproval = "approval"
)

// AcceptDeploy applies a deploy callback: status "success" (or "applied")
// flips the MR's MERGED change to VALIDATED; status "failed" on a MERGED
// change is recorded on it (recordFailedDeploy) and answered
// ResultFailedRecorded, moving nothing. Deduplicated on RequestID
// among deploy callbacks. A success for a merged change (MERGED or already
// VALIDATED, with the merge commit matching when the callback names one) is
// a confirmed deploy whatever the answer: it raises the watermark of the
// change's project and target branch (DESIGN §3 step 8), recorded in the
// same transaction as the request.
func (e *Engine) AcceptDeploy(ctx context.Context, cb rules.DeployCallback) (string, error) {
	if _, err := e.st.CallbackResult(ctx, e.st.DB(), callbackKindDeploy, cb.RequestID); err == nil {
		return rules.ResultDuplicate, nil
	}
	op, err := e.st.FindOperationByMR(ctx, e.st.DB(), e.platform, cb.ProjectID, cb.MRIID)
	result, confirmed := rules.ResultIgnoredStale, false
	switch {
	case errors.Is(err, store.ErrNotFound):
		result = rules.ResultIgnoredUnknown
	case err != nil:
		return "", err
	case cb.MergeCommitSHA != "" && op.MergeCommitSHA != "" && cb.MergeCommitSHA != op.MergeCommitSHA:
		result = rules.ResultIgnoredStale
	case cb.Status == "failed":
		// A failed deploy is not final: a re-run, or a later deploy that
		// contains the merge commit, still applies the change, and the bot
		// cannot deploy by itself. So the change stays MERGED; the failure is
		// made readable on it (its detail and the status comment).
		if op.Status == store.StatusMerged {
			recorded, err := e.recordFailedDeploy(ctx, op.ID, cb)
			switch {
			case errors.Is(err, store.ErrDuplicate):
				return rules.ResultDuplicate, nil
			case err != nil:
				return "", err
			case recorded:
				// The request was recorded with the event, in its
				// transaction.
				return rules.ResultFailedRecorded, nil
			}
			// No longer MERGED: stale, recorded below.
		}
	case cb.Status == "success" || cb.Status == "applied":
		confirmed = op.Status == store.StatusMerged || op.Status == store.StatusValidated
		flipped, err := e.MarkValidated(ctx, op.ID, SourceCallback+":"+cb.RequestID, "deploy", map[string]any{"mr_iid": cb.MRIID})
		if err != nil {
			return "", err
		}
		if flipped {
			result, confirmed = rules.ResultAccepted, true
		}
	}
	opID := ""
	if err == nil {
		opID = op.ID
	}
	err = e.st.InTx(ctx, func(tx store.Tx) error {
		if err := e.st.InsertCallbackRequest(ctx, tx, cb.RequestID, callbackKindDeploy, opID, result); err != nil {
			return err
		}
		if !confirmed {
			return nil
		}
		return e.st.RecordDeployConfirmation(ctx, tx, store.DeployConfirmation{
			ProjectID: op.ProjectID, TargetBranch: op.TargetBranch, MRIID: op.MRIID})
	})
	if errors.Is(err, store.ErrDuplicate) {
		return rules.ResultDuplicate, nil
	} else if err != nil {
		return "", err
	}
	return result, nil
}

// recordFailedDeploy writes a deploy callback's "failed" on the MERGED
// change opID without moving it: its detail says what the deploy system
// reported and what happens next, a deploy_failed event (source
// "callback:<request_id>", actor "deploy") records it, and the status
// comment is refreshed. The callback request is recorded (answered
// ResultFailedRecorded) in the same transaction as the event, so a
// callback sent again, or twice at once, writes one event: the other gets
// store.ErrDuplicate. The step and its clock are kept, so the deploy wait
// and its deadline (DEPLOY_PENDING) go on as before. A change that moved
// meanwhile is read again, up to markValidatedAttempts times; one that is
// no longer MERGED is left as it is (false, nil: nothing written, the
// caller records the request as stale). A change still moving after the
// attempts is an error, so the sender is answered 503 and sends again.
func (e *Engine) recordFailedDeploy(ctx context.Context, opID string, cb rules.DeployCallback) (bool, error) {
	for range markValidatedAttempts {
		op, err := e.st.GetOperation(ctx, e.st.DB(), opID)
		if err != nil {
			return false, err
		}
		if op.Status != store.StatusMerged {
			return false, nil
		}
		w := rules.WordsOf(op.Platform)
		detail := fmt.Sprintf("the deploy system reported the deploy of %s failed (deploy callback %s); "+
			"the change stays merged and is applied by the next deploy that succeeds: re-run the deploy or fix it in a new change",
			w.Ref(op.MRIID), cb.RequestID)
		_, _, err = e.st.ApplyTransition(ctx, store.TransitionParams{
			OperationID: op.ID, ExpectStep: op.Step, ExpectVersion: op.Version, ToStep: op.Step, ToStatus: op.Status,
			KeepStepClock: true, Update: func(o *store.Operation) { o.Detail = detail },
			Guard: func(ctx context.Context, tx store.Tx, _ store.Operation, _ store.Binding) error {
				return e.st.InsertCallbackRequest(ctx, tx, cb.RequestID, callbackKindDeploy, op.ID, rules.ResultFailedRecorded)
			},
			Event: store.EventParams{Type: store.EventDeployFailed, Actor: "deploy", Source: SourceCallback + ":" + cb.RequestID,
				Payload: map[string]any{"deploy_status": cb.Status, "mr_iid": cb.MRIID, "detail": detail}},
			Jobs: e.refreshNoteJobs(op, op.Version+1),
		})
		if isConflict(err) {
			continue
		}
		if errors.Is(err, store.ErrDuplicate) {
			return false, err
		}
		if err != nil {
			return false, fmt.Errorf("recording the failed deploy of %s: %w", op.ID, err)
		}
		return true, nil
	}
	return false, fmt.Errorf("recording the failed deploy of %s (deploy callback %s): the change kept moving; not recorded", opID, cb.RequestID)
}

// deployPlatform is what the deploy step (the target branch's pipeline of
// the merge) itself calls on the platform (issue 20 point 2: a step worker
// is given only the methods it calls); the engine's shared moves
// (Transition, failures) keep their own.
type deployPlatform interface {
	Pipelines(ctx context.Context, projectID int64, ref, sha string) ([]platform.Pipeline, error)
}

// deployWorker runs the deploy step (the target branch's pipeline of the
// merge) with deployPlatform in place of the engine's whole platform; it
// calls the store only through the engine's shared moves.
type deployWorker struct {
	*Engine
	gl deployPlatform
}

// deployWorker is e's deploy step (the target branch's pipeline of the
// merge) worker.
func (e *Engine) deployWorker() deployWorker { return deployWorker{Engine: e, gl: e.gl} }
