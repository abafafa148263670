package flows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"changebot/flows/rules"
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

// ErrEarlyHook is returned by ApplyHook for a webhook that came before the
// change it concerns entered the step that waits for it: an instant
// pipeline's webhook (or the new head's, after a rebase) processed while
// the job that opened the merge request, or rebased it, has not yet
// committed its move into the pipeline wait (issue 12 point 2). Nothing was
// changed and no GitLab or GitHub call was made (except for a merge or
// close hook whose merge request the platform had not yet settled: its
// read; applyStateHook); the caller applies the delivery again shortly (the delivery job snoozes, a bounded number of
// times), so the wait does not sit until its first poll. Once the bound is
// used up the caller applies it under WithoutEarlyWait, as it stands (a
// pipeline webhook of a change not waiting is dropped; the wait's poll
// still finds the pipeline).
var ErrEarlyHook = errors.New("webhook came before the change entered the step that waits for it")

// ApplyHook applies one decoded webhook of the flow: pipeline and merge
// request events (comments are the command layer's, routed there by the
// delivery router above flows; here they are OutcomeIgnored). deliveryID
// names the stored delivery in the event's source. Webhooks only speed
// things up: every wait also polls, so an event that does not fit is
// dropped safely. It returns the outcome to record on the delivery.
func (e *Engine) ApplyHook(ctx context.Context, deliveryID int64, ev platform.HookEvent) (string, error) {
	source := fmt.Sprintf("%s:%d", SourceWebhook, deliveryID)
	if p := ev.Pipeline; p != nil && p.MRIID == 0 && (p.Partial || (!p.Tag && strings.HasPrefix(p.Ref, e.prefix))) {
		iid, op := e.requestOfBranch(ctx, ev.ProjectID, p.Ref)
		if iid == 0 && op != nil && EarlyWaitAllowed(ctx) && opensRequest(*op) && hookDecides(op.Platform, p.Status) {
			// A check of a change's source branch whose pull request
			// the create job is opening right now: it comes back once
			// the change waits for its checks.
			return "", ErrEarlyHook
		}
		if iid > 0 {
			// A check of a change's source branch whose payload names no
			// pull request (a GitHub commit status), or a GitLab pipeline
			// of that branch (the deferred pipeline of a merge queue's
			// head, runDeferredPipeline): the change's.
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

type noEarlyWaitKey struct{}

// WithoutEarlyWait returns ctx under which ApplyHook never returns
// ErrEarlyHook: the delivery's early waits are used up, and the webhook is
// applied as it stands (dropped, or settling what it can).
func WithoutEarlyWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, noEarlyWaitKey{}, true)
}

// EarlyWaitAllowed reports whether ApplyHook may answer ErrEarlyHook under
// ctx (see WithoutEarlyWait).
func EarlyWaitAllowed(ctx context.Context) bool {
	no, _ := ctx.Value(noEarlyWaitKey{}).(bool)
	return !no
}

type earlyRepeatKey struct{}

// AsEarlyRepeat returns ctx for applying a delivery again after it was
// early (ErrEarlyHook): a target-branch pipeline then settles only the
// changes merged at its sha, since its first application settled the
// others (one compare call per pipeline, not one per application).
func AsEarlyRepeat(ctx context.Context) context.Context {
	return context.WithValue(ctx, earlyRepeatKey{}, true)
}

func isEarlyRepeat(ctx context.Context) bool {
	r, _ := ctx.Value(earlyRepeatKey{}).(bool)
	return r
}

// requestOfBranch returns the merge request iid of the change whose
// source branch is branch (the engine's prefix and the operation id) in
// project projectID on this platform, 0 when branch is no change's or the
// change has no merge request yet, and the change (nil when branch is no
// change's on this platform). The change's project and source branch are
// only checked once they are recorded (the create job records them with the
// merge request). One read of the operation.
func (e *Engine) requestOfBranch(ctx context.Context, projectID int64, branch string) (int64, *store.Operation) {
	id, ok := strings.CutPrefix(branch, e.prefix)
	if !ok || id == "" {
		return 0, nil
	}
	op, err := e.st.GetOperation(ctx, e.st.DB(), id)
	if err != nil || op.Platform != e.platform {
		return 0, nil
	}
	if op.MRIID == 0 {
		if (op.ProjectID != 0 && op.ProjectID != projectID) || (op.SourceBranch != "" && op.SourceBranch != branch) {
			return 0, nil
		}
		return 0, &op
	}
	if op.ProjectID != projectID || op.SourceBranch != branch {
		return 0, nil
	}
	return op.MRIID, &op
}

// opensRequest reports whether op is in the step whose job opens its merge
// request and then waits for its pipeline (CREATE_STARTED, before
// CREATE_MR_OPENED).
func opensRequest(op store.Operation) bool {
	return rules.BeforePipelineWait(rules.StepCode(op.Step)) && rules.InCreatePhase(rules.StepCode(op.Step))
}

// hookDecides reports whether a pipeline webhook of status would move a
// change that waits for the pipeline: a finished pipeline, or one that
// waits for a person. A running pipeline's webhook is not worth waiting for.
func hookDecides(platformName, status string) bool {
	pipe := platform.Pipeline{Status: status}
	return pipe.Finished() || waitsForPerson(rules.WordsOf(platformName), status) != ""
}

// pipelineHookTrusted reports whether a GitLab merge request pipeline
// webhook p is believed without reading the merge request (issue 24 point
// 3): it reports a success, of a whole pipeline (not one GitHub check), at
// the head sha the change already knows, of a pipeline no older than the
// one it waits for. A merged-results pipeline (another sha), a failure and
// a pipeline waiting for a person are read first, as before. What the read
// would catch here (the head moved on, the MR merged or closed, a newer
// pipeline at the same head) the approve step's read catches before any
// write: it approves only when the MR's head pipeline is this one and passed
// (pipelineConfirmed), else the change waits for its pipeline again.
func pipelineHookTrusted(op store.Operation, p *platform.PipelineHook) bool {
	return !rules.WordsOf(op.Platform).OnGitHub() && !p.Partial && p.Status == platform.PipelineSuccess &&
		op.HeadSHA != "" && p.SHA == op.HeadSHA && p.ID > 0 && p.ID >= op.PipelineID
}

// earlyPipelineHook reports whether a pipeline webhook at sha, of a status
// that decides (hookDecides), came early for op (ErrEarlyHook): op is in
// the step right before its pipeline wait, and in the handle phase sha is
// not the head op already knows (the pipeline of a head op knew was
// decided before; a new head's is the one the wait will be about). In the
// create phase any sha: the head is recorded with the merge request.
func earlyPipelineHook(op store.Operation, sha, status string) bool {
	step := rules.StepCode(op.Step)
	if !rules.BeforePipelineWait(step) || !hookDecides(op.Platform, status) {
		return false
	}
	return rules.InCreatePhase(step) || op.HeadSHA == "" || sha != op.HeadSHA
}

func (e *Engine) applyMRPipeline(ctx context.Context, ev platform.HookEvent, source string) (string, error) {
	p := ev.Pipeline
	op, err := e.st.FindOperationByMR(ctx, e.st.DB(), e.platform, ev.ProjectID, p.MRIID)
	if errors.Is(err, store.ErrNotFound) {
		if _, op := e.requestOfBranch(ctx, ev.ProjectID, p.MRSourceBranch); EarlyWaitAllowed(ctx) && op != nil && op.MRIID == 0 &&
			opensRequest(*op) && hookDecides(op.Platform, p.Status) {
			// The pipeline of the merge request the create job has
			// opened and not yet recorded.
			return "", ErrEarlyHook
		}
		return OutcomeUnrelated, nil
	}
	if err != nil {
		return "", err
	}
	pipe := platform.Pipeline{ID: p.ID, SHA: p.SHA, Ref: p.Ref, Status: p.Status, WebURL: p.WebURL, Source: p.Source}
	waiting := waitsForPerson(rules.WordsOf(op.Platform), pipe.Status)
	if !rules.WaitsForPipeline(rules.StepCode(op.Step)) && EarlyWaitAllowed(ctx) && earlyPipelineHook(op, p.SHA, p.Status) {
		if rules.StepCode(op.Step) == rules.HandleRebasing {
			// The pipeline of the rebased head finished before the rebase
			// poll saw the rebase end: the rebase is over, so the poll
			// looks now (it moves the change to the pipeline wait, where
			// this hook, applied again shortly, ends the wait) instead of
			// at its next interval.
			if _, err := e.st.WakeStep(ctx, e.st.DB(), op.ID, op.Step, []string{rules.KindHandle}); err != nil {
				e.opLog(op).Warn("waking the rebase poll failed", "err", err)
			}
		}
		return "", ErrEarlyHook
	}
	if !rules.WaitsForPipeline(rules.StepCode(op.Step)) || (!pipe.Finished() && (waiting == "" || op.Detail == waiting)) {
		e.postponePoll(ctx, op)
		return OutcomeNoChange, nil
	}
	if p.Partial && (op.HeadSHA == "" || p.SHA != op.HeadSHA) {
		// One check of another sha (an old head's late check): it says
		// nothing of the head's CI state and costs no read.
		e.postponePoll(ctx, op)
		return OutcomeNoChange, nil
	}
	if pipelineHookTrusted(op, p) {
		// A success at the head the change knows is taken on the
		// webhook's word: the approve step's read of the MR, which comes
		// next and before any write, confirms it (pipelineConfirmed).
		if err := e.pipelineFinished(ctx, op, p.SHA, pipe, source, false); err != nil && !isConflict(err) {
			return "", err
		}
		return OutcomeApplied, nil
	}
	// Only the MR can tell whether this is the pipeline of its current
	// head: a merged-results pipeline runs on another sha, and a late
	// pipeline of an old head carries the sha we last saw while the head
	// has moved on (issue 4 point 4). One read per finished MR pipeline
	// but a success at the known head (pipelineHookTrusted), and per
	// pipeline that starts waiting for a person (issue 10 point 8); on
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
		waiting = waitsForPerson(rules.WordsOf(op.Platform), pipe.Status)
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
	if err := e.pipelineFinished(ctx, op, head, pipe, source, true); err != nil && !isConflict(err) {
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
	exact := false
	for _, op := range ops {
		switch {
		case op.TargetBranch != p.Ref:
		case op.MergeCommitSHA == p.SHA:
			exact = true
			if err := flip(op, ruleExact); err != nil {
				return "", err
			}
		default:
			later = append(later, op)
		}
	}
	if len(later) > 0 && !isEarlyRepeat(ctx) {
		// The changes merged before settle now, once: a repeat of an
		// early delivery made this compare already.
		contained, err := e.branchContains(ctx, ev.ProjectID, p.Ref, p.SHA, later)
		for _, op := range contained {
			if err := flip(op, ruleContains); err != nil {
				return "", err
			}
		}
		if err != nil {
			return "", err
		}
	}
	if !exact && EarlyWaitAllowed(ctx) && !strings.HasPrefix(p.Ref, e.prefix) {
		early, err := e.mergeInFlight(ctx, ev.ProjectID, p.Ref)
		if err != nil {
			return "", err
		}
		if early {
			// No change is merged at this sha yet, and one of the
			// project's changes is being merged into this branch: the
			// pipeline may be its merge commit's, come before the merge
			// job committed HANDLE_MERGED. Applied again, it settles
			// exact matches only.
			return "", ErrEarlyHook
		}
	}
	return outcome, nil
}

// mergeInFlightWindow bounds how long ago a change may have entered
// HANDLE_APPROVED and still be found by mergeInFlight; mergeInFlightLimit
// bounds the rows read.
const (
	mergeInFlightWindow = time.Hour
	mergeInFlightLimit  = 500
)

// mergeInFlight reports whether a change of project projectID on this
// platform is in HANDLE_APPROVED, the step whose job merges it into
// branch and then waits for the deploy (HANDLE_MERGED), having entered it
// within mergeInFlightWindow. One read of the merging changes.
func (e *Engine) mergeInFlight(ctx context.Context, projectID int64, branch string) (bool, error) {
	now := e.now()
	ops, err := e.st.ListOperationsByStatus(ctx, e.st.DB(), []string{store.StatusMerging},
		now.Add(-mergeInFlightWindow), now.Add(mergeInFlightWindow), mergeInFlightLimit)
	if err != nil {
		return false, fmt.Errorf("listing the changes being merged: %w", err)
	}
	return slices.ContainsFunc(ops, func(op store.Operation) bool {
		return rules.StepCode(op.Step) == rules.HandleApproved && op.Platform == e.platform &&
			op.ProjectID == projectID && op.TargetBranch == branch
	}), nil
}

// applyMergeRequestHook handles MR events: a merge done outside the bot (or
// whose answer we lost) finishes the change as merged, naming who merged
// it; a close by a person ends it in MR_CLOSED; both only once the platform
// confirms it (applyStateHook). A new target branch stops the change in
// HANDLE_RETARGETED once the platform confirms it (applyRetargetHook).
func (e *Engine) applyMergeRequestHook(ctx context.Context, ev platform.HookEvent, source string) (string, error) {
	h := ev.MergeRequest
	if e.DevelopersRequest(h) && h.MayChangePolicy() && e.PolicyMatters(ev.ProjectPath) {
		if _, err := e.checkPolicyFile(ctx, ev); err != nil {
			return "", err
		}
	}
	if e.cfg.Adopt.Allows(ev.ProjectPath) && h.MayAdopt(e.cfg.Adopt.label()) {
		if outcome, done, err := e.applyAdoptHook(ctx, ev, source); done || err != nil {
			return outcome, err
		}
	}
	if !h.MovesChanges() {
		return OutcomeNoChange, nil
	}
	op, err := e.st.FindOperationByMR(ctx, e.st.DB(), e.platform, ev.ProjectID, h.IID)
	if errors.Is(err, store.ErrNotFound) {
		return OutcomeUnrelated, nil
	}
	if err != nil {
		return "", err
	}
	switch h.Action {
	case "merge", "close":
		return e.applyStateHook(ctx, op, ev, source)
	case "update":
		if h.TargetChanged {
			return e.applyRetargetHook(ctx, op, ev, source)
		}
		if h.DraftChanged && !h.Draft {
			return e.applyReadyHook(ctx, op, source)
		}
		if h.QueueChanged {
			return e.applyQueueHook(ctx, op)
		}
		return e.applyHeadPush(ctx, op)
	}
	return e.applyApprovalHook(ctx, op, ev, source)
}

// DevelopersRequest reports whether h is of a merge request a person
// opened, not one of the robot's own (whose source branch is the engine's
// prefix and an operation id): an API change's `.changebot.yml` is
// checked when it is submitted, a developer's on its merge request. It
// makes no call.
func (e *Engine) DevelopersRequest(h *platform.MergeRequestHook) bool {
	return h != nil && !strings.HasPrefix(h.SourceBranch, e.prefix)
}

// applyHeadPush applies a Merge Request Hook saying the head moved (an
// update with oldrev: a push, a rebase): a change polling its rebase
// (HANDLE_REBASING) looks now instead of at its next interval, so the
// queue's head moves on to its new head's pipeline as soon as the rebase
// is pushed (issue 22). No call, no write but the poll's due time; any
// other step reads the head where it needs it. A push that comes while the
// change is still at HANDLE_APPROVED (the merge job asked for the rebase
// and has not recorded it yet) is applied again shortly (ErrEarlyHook).
func (e *Engine) applyHeadPush(ctx context.Context, op store.Operation) (string, error) {
	if rules.StepCode(op.Step) == rules.HandleApproved && EarlyWaitAllowed(ctx) {
		// Most often the rebase the merge job has just asked for, pushed
		// before the job's move to HANDLE_REBASING committed: applied
		// again shortly, it wakes that step's poll.
		return "", ErrEarlyHook
	}
	if rules.StepCode(op.Step) != rules.HandleRebasing {
		return OutcomeNoChange, nil
	}
	if _, err := e.st.WakeStep(ctx, e.st.DB(), op.ID, op.Step, []string{rules.KindHandle}); err != nil {
		return "", err
	}
	return OutcomeNoChange, nil
}

// applyQueueHook applies a hook saying the change's entry in the
// platform's merge queue changed (QueueChanged: GitHub's merge_group, or
// pull_request dequeued): a change in HANDLE_IN_TRAIN polls its entry now
// instead of at its next interval, so a dequeued pull request fails
// without waiting for the poll (issue 22 point 4). No call, no write but
// the poll's due time; the merge itself comes as its own closed webhook.
func (e *Engine) applyQueueHook(ctx context.Context, op store.Operation) (string, error) {
	if rules.StepCode(op.Step) != rules.HandleInTrain {
		return OutcomeNoChange, nil
	}
	if _, err := e.st.WakeStep(ctx, e.st.DB(), op.ID, op.Step, []string{rules.KindHandle}); err != nil {
		return "", err
	}
	return OutcomeNoChange, nil
}

// applyStateHook applies a Merge Request Hook saying the MR was merged or
// closed. The webhook is a hint, not the truth: anyone holding the
// webhook's secret token (or a replayed, reordered or forged delivery) can
// say "merged", and a change recorded MERGED on a merge that did not
// happen has no way back (its merge commit does not exist, so no deploy
// ever confirms it, and a merged change cannot be cancelled). So the MR is
// read from the platform (one call, only for a change that could still
// move) and the change moves only as it says: merged (with its merge
// commit) finishes it as merged, closed ends it in MR_CLOSED. An MR the
// platform is still merging (locked), or still opened after a merge hook
// (a read lagging behind the hook), is read again: the delivery is applied
// again shortly (ErrEarlyHook, a bounded number of times; stateMaySettle).
// Anything else (still opened after a close hook, reopened since, or still
// not settled once the delivery's waits are used up) moves nothing, and the
// contradicting webhook is counted (changebot_webhooks_contradicted_total)
// and logged.
// Who merged or closed it is the platform's answer, else the hook's user.
// A merge hook for a change whose own merge job is running
// (HANDLE_APPROVED) is applied again shortly before it is read: it is most
// often that job's merge, which the job records itself.
func (e *Engine) applyStateHook(ctx context.Context, op store.Operation, ev platform.HookEvent, source string) (string, error) {
	h := ev.MergeRequest
	step := rules.StepCode(op.Step)
	if !rules.CanMove(step, rules.HandleMerged) && !rules.CanMove(step, rules.ClosedByPerson) {
		return OutcomeNoChange, nil
	}
	if step == rules.HandleApproved && h.Action == "merge" && EarlyWaitAllowed(ctx) {
		// The change's own merge job is running: the merge hook is most
		// likely its merge's, which the job records itself (the change is
		// then HANDLE_MERGED and the hook a no-op). Apply it again shortly
		// instead of reading the merge request a second time; once the
		// delivery's waits are used up it is read as any other.
		return "", ErrEarlyHook
	}
	mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, false)
	if err != nil {
		return "", fmt.Errorf("reading %s to check a %q webhook: %w", rules.WordsOf(op.Platform).MRRef(op.MRIID), h.Action, err)
	}
	switch mr.State {
	case platform.MRStateMerged:
		if !rules.CanMove(step, rules.HandleMerged) {
			return OutcomeNoChange, nil
		}
		if mr.MergedBy.Username == "" && h.Action == "merge" {
			mr.MergedBy = ev.User
		}
		if err := e.finishMerged(ctx, op, mr, source); err != nil && !isConflict(err) {
			return "", err
		}
		return OutcomeApplied, nil
	case platform.MRStateClosed:
		if !rules.CanMove(step, rules.ClosedByPerson) {
			return OutcomeNoChange, nil
		}
		who := mr.ClosedBy.Username
		if who == "" && h.Action == "close" {
			who = ev.User.Username
		}
		if err := e.closedByPerson(ctx, op, who, source); err != nil {
			return "", err
		}
		return OutcomeApplied, nil
	}
	if stateMaySettle(h.Action, mr.State) && EarlyWaitAllowed(ctx) {
		// The platform is still merging it, or its read lags just behind
		// the hook: read again shortly, a bounded number of times, before
		// calling the webhook contradicted.
		e.opLog(op).Debug("a merge request webhook is not yet confirmed by the platform: read again shortly",
			"action", h.Action, "state", mr.State, "delivery", source)
		return "", ErrEarlyHook
	}
	e.m.contradicted.WithLabelValues(h.Action).Inc()
	e.opLog(op).Warn("a merge request webhook is contradicted by the platform: nothing moved",
		"action", h.Action, "state", mr.State, "delivery", source, "hook_user", ev.User.Username)
	return OutcomeNoChange, nil
}

// stateMaySettle reports whether a merge request read in state, for a
// Merge Request Hook of action, may still turn into what the hook says, so
// the hook is applied again shortly (ErrEarlyHook) rather than counted as
// contradicted: "locked", which GitLab shows while a merge runs (it ends
// merged, or opened again when the merge fails), and "opened" after a
// "merge" hook, a read that lags just behind the hook. A close hook on an
// opened MR is not retried: the MR was reopened since, or the hook is false.
func stateMaySettle(action, state string) bool {
	return state == platform.MRStateLocked || (action == "merge" && state == platform.MRStateOpened)
}

// applyRetargetHook applies a Merge Request Hook that changed the MR's
// target branch (GitLab's changes.target_branch, GitHub's edited with
// changes.base; platform.MergeRequestHook.TargetChanged). A change in a
// step that may still approve, rebase or merge is stopped in
// HANDLE_RETARGETED when the platform, read once, shows the MR open and
// targeting another branch than the change's: the hook may be stale (the MR
// retargeted back since) or forged, so it is not believed on its own. A
// hook that retargets the MR back moves nothing: /retry does.
func (e *Engine) applyRetargetHook(ctx context.Context, op store.Operation, ev platform.HookEvent, source string) (string, error) {
	h := ev.MergeRequest
	if !rules.CanMove(rules.StepCode(op.Step), rules.HandleRetargeted) || !retargeted(op, h.TargetBranch) {
		return OutcomeNoChange, nil
	}
	mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, false)
	if err != nil {
		return "", fmt.Errorf("reading %s to check a new target branch: %w", rules.WordsOf(op.Platform).MRRef(op.MRIID), err)
	}
	if mr.State != platform.MRStateOpened || !retargeted(op, mr.TargetBranch) {
		return OutcomeNoChange, nil
	}
	if err := e.stopRetargeted(ctx, op, mr.TargetBranch, source); err != nil {
		return "", err
	}
	return OutcomeApplied, nil
}

// applyReadyHook applies a Merge Request Hook that marked the MR ready
// (changes.draft true -> false): a change waiting in HANDLE_DRAFT goes back
// to merging at once; anywhere else nothing changes (issue 10 point 3).
func (e *Engine) applyReadyHook(ctx context.Context, op store.Operation, source string) (string, error) {
	if rules.StepCode(op.Step) != rules.HandleDraft {
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
	if !rules.WaitsForPipeline(rules.StepCode(op.Step)) {
		return
	}
	until := e.now().Add(e.pollFor(op).ShortInterval)
	if _, err := e.st.PostponeStepJobs(ctx, e.st.DB(), op.ID, op.Step, []string{rules.KindAwaitPipeline}, until); err != nil {
		e.opLog(op).Warn("postponing the poll after a webhook failed", "err", err)
	}
}
