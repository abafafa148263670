package flows

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"changebot/platform"
	"changebot/store"
)

// handle runs the handle phase (DESIGN §3 step 6), one step per job run:
// approve as each reviewer robot, merge with the head sha, rebase when
// GitLab asks for it. It always reads GitLab first; remote state wins.
func (e *Engine) handle(ctx context.Context, op store.Operation) error {
	switch StepCode(op.Step) {
	case CreateSucceeded:
		_, err := e.Transition(ctx, op, HandleStarted, TransitionOpts{Source: "job:" + KindHandle})
		return err
	case HandleStarted:
		return e.approve(ctx, op)
	case HandleApproved:
		return e.merge(ctx, op)
	case HandleRebasing:
		return e.pollRebase(ctx, op)
	}
	return nil
}

// readOpenMR reads the MR and settles the cases where there is nothing to
// do: already merged (finish as merged, never approve again), closed
// (failure), head moved (back to waiting for the new head's pipeline).
// done reports that the caller must stop.
func (e *Engine) readOpenMR(ctx context.Context, op store.Operation, includeRebase bool) (platform.MergeRequest, bool, error) {
	mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, includeRebase)
	if err != nil {
		return mr, true, notFoundIs(err, HandleFailed, "merge request !%d no longer exists", op.MRIID)
	}
	switch {
	case mr.State == platform.MRStateMerged:
		return mr, true, e.finishMerged(ctx, op, mr, "job:"+KindHandle)
	case mr.State == platform.MRStateClosed:
		return mr, true, failTo(HandleFailed, "merge request !%d was closed in GitLab; reopen it and /retry, or /cancel", op.MRIID)
	case mr.SHA != "" && op.HeadSHA != "" && mr.SHA != op.HeadSHA && !mr.RebaseInProgress:
		return mr, true, e.headMoved(ctx, op, mr.SHA)
	}
	return mr, false, nil
}

// headMoved sends the change back to wait for the pipeline of the new head.
func (e *Engine) headMoved(ctx context.Context, op store.Operation, head string) error {
	_, err := e.Transition(ctx, op, HandleAwaitPipeline, TransitionOpts{Source: "job:" + KindHandle,
		Payload: map[string]any{"head_sha": head, "previous_head_sha": op.HeadSHA},
		Update:  func(o *store.Operation) { o.HeadSHA = head }})
	return err
}

// approve approves as every reviewer robot that has not approved the head
// yet (DESIGN §5): read who approved first (fail-open), approve with the
// head sha, and after a 401 read once more, since GitLab answers 401 both
// for "already approved" and "not allowed".
func (e *Engine) approve(ctx context.Context, op store.Operation) error {
	mr, done, err := e.readOpenMR(ctx, op, false)
	if done {
		return err
	}
	approved := e.approvedSet(ctx, op)
	for i := range e.gl.ReviewerCount() {
		u, err := e.gl.Reviewer(ctx, i)
		if err != nil {
			if s := platform.StatusOf(err); s == 401 || s == 403 {
				return failTo(HandleReviewerDenied, "reviewer robot #%d: its token is not accepted by GitLab (%d)", i+1, s)
			}
			return err
		}
		if approved[u.ID] {
			continue
		}
		err = e.gl.Approve(ctx, i, op.ProjectID, op.MRIID, mr.SHA)
		switch s := platform.StatusOf(err); {
		case err == nil:
		case s == 409:
			return e.headMoved(ctx, op, "")
		case s == 401 || s == 403:
			if e.approvedSet(ctx, op)[u.ID] {
				continue
			}
			return failTo(HandleReviewerDenied, "reviewer %s may not approve !%d (GitLab answered %d)", u.Username, op.MRIID, s)
		default:
			if platform.IsTransient(err) {
				return err
			}
			return failTo(HandleFailed, "approving as %s: %s", u.Username, failureDetail(err))
		}
	}
	_, err = e.Transition(ctx, op, HandleApproved, TransitionOpts{Source: "job:" + KindHandle,
		Payload: map[string]any{"head_sha": mr.SHA, "reviewers": e.gl.ReviewerCount()}})
	return err
}

// approvedSet reads who approved; an unreadable list counts as "nobody yet"
// (fail-open, DESIGN §5).
func (e *Engine) approvedSet(ctx context.Context, op store.Operation) map[int64]bool {
	users, err := e.gl.Approvals(ctx, op.ProjectID, op.MRIID)
	if err != nil {
		e.opLog(op).Warn("reading approvals failed, assuming none", "err", err)
		return map[int64]bool{}
	}
	out := make(map[int64]bool, len(users))
	for _, u := range users {
		out[u.ID] = true
	}
	return out
}

// merge merges with the head sha, the way the project requires, and acts
// on GitLab's answer (GITLAB-FACTS §2.6).
func (e *Engine) merge(ctx context.Context, op store.Operation) error {
	mr, done, err := e.readOpenMR(ctx, op, false)
	if done {
		return err
	}
	proj, err := e.gl.Project(ctx, op.Project)
	if err != nil {
		return err
	}
	squash := proj.SquashOption == "always" || proj.SquashOption == "default_on"
	res, err := e.gl.Merge(ctx, op.ProjectID, op.MRIID, platform.MergeParams{SHA: mr.SHA, Squash: squash})
	switch s := platform.StatusOf(err); {
	case err == nil && res.State == platform.MRStateMerged:
		return e.finishMerged(ctx, op, res, "job:"+KindHandle)
	case err == nil:
		return failTo(HandleNotMergeable, "GitLab accepted the merge but !%d stayed %s: %s", op.MRIID, res.State, orUnknown(res.MergeError))
	case s == 409:
		return e.headMoved(ctx, op, "")
	case s == 405 || s == 406 || s == 422:
		return e.notMergeable(ctx, op)
	case s == 401 || s == 403:
		return failTo(HandleNotMergeable, "the robot may not merge !%d into %s (GitLab answered %d)", op.MRIID, op.TargetBranch, s)
	default:
		return err
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// notMergeable re-reads the MR after a 405/406/422 and decides from its
// detailed_merge_status (GITLAB-FACTS §2.4).
func (e *Engine) notMergeable(ctx context.Context, op store.Operation) error {
	mr, done, err := e.readOpenMR(ctx, op, true)
	if done {
		return err
	}
	switch mr.DetailedMergeStatus {
	case "checking", "preparing", "unchecked", "ci_still_running", "approvals_syncing", "mergeable":
		return snoozeFor(e.poll.ShortInterval)
	case "need_rebase":
		return e.startRebase(ctx, op)
	case "not_approved":
		if op.Rounds >= e.poll.MaxRounds {
			return failTo(HandleNotMergeable, "still not approved after %d rounds", op.Rounds)
		}
		_, err := e.Transition(ctx, op, HandleStarted, TransitionOpts{Source: "job:" + KindHandle,
			Payload: map[string]any{"reason": mr.DetailedMergeStatus},
			Update:  func(o *store.Operation) { o.Rounds++ }})
		return err
	case "conflict":
		return failTo(HandleRebaseConflict, "!%d has conflicts with %s", op.MRIID, op.TargetBranch)
	case "ci_must_pass":
		return failTo(HandleFailed, "the pipeline of %s did not pass", short(mr.SHA))
	}
	reason := mr.DetailedMergeStatus
	if mr.MergeError != "" {
		reason += ": " + mr.MergeError
	}
	return failTo(HandleNotMergeable, "GitLab refuses to merge !%d (%s)", op.MRIID, reason)
}

// startRebase asks GitLab to rebase (202) and moves to HANDLE_REBASING; a
// bounded number of rounds per change.
func (e *Engine) startRebase(ctx context.Context, op store.Operation) error {
	if op.Rounds >= e.poll.MaxRounds {
		return failTo(HandleFailed, "target branch kept moving: gave up after %d rebase rounds", op.Rounds)
	}
	err := e.gl.Rebase(ctx, op.ProjectID, op.MRIID)
	switch s := platform.StatusOf(err); {
	case err == nil, s == 409: // 409: a rebase is already running; poll it, never start a second
	case s == 403:
		return failTo(HandleFailed, "GitLab refuses to rebase !%d: %s", op.MRIID, failureDetail(err))
	default:
		return err
	}
	_, err = e.Transition(ctx, op, HandleRebasing, TransitionOpts{Source: "job:" + KindHandle,
		Update: func(o *store.Operation) { o.Rounds++ }, Delay: e.poll.ShortInterval})
	return err
}

// pollRebase waits for a running rebase on stepped intervals.
func (e *Engine) pollRebase(ctx context.Context, op store.Operation) error {
	mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, true)
	if err != nil {
		return notFoundIs(err, HandleFailed, "merge request !%d no longer exists", op.MRIID)
	}
	switch {
	case mr.State == platform.MRStateMerged:
		return e.finishMerged(ctx, op, mr, "job:"+KindHandle)
	case mr.RebaseInProgress:
		if d, ok := e.nextPoll(op.StepStartedAt, e.poll.RebaseDeadline); ok {
			return snoozeFor(d)
		}
		_, err := e.Transition(ctx, op, HandleRebasePending, TransitionOpts{Source: "job:" + KindHandle,
			Update: func(o *store.Operation) { o.Detail = "rebase still running after " + e.poll.RebaseDeadline.String() }})
		return err
	case strings.Contains(mr.MergeError, "Rebase failed") || mr.HasConflicts || mr.DetailedMergeStatus == "conflict":
		return failTo(HandleRebaseConflict, "rebasing !%d onto %s failed: %s", op.MRIID, op.TargetBranch, orUnknown(mr.MergeError))
	}
	_, err = e.Transition(ctx, op, HandleAwaitPipeline, TransitionOpts{Source: "job:" + KindHandle,
		Payload: map[string]any{"head_sha": mr.SHA, "rebased": true},
		Update:  func(o *store.Operation) { o.HeadSHA = mr.SHA }})
	return err
}

// finishMerged records a merge GitLab shows (DESIGN §3 step 6: already
// merged -> finish as merged). The merge commit is the merge commit, the
// squash commit, or the head itself for a fast-forward.
func (e *Engine) finishMerged(ctx context.Context, op store.Operation, mr platform.MergeRequest, source string) error {
	commit := mr.MergeCommitSHA
	if commit == "" {
		commit = mr.SquashCommitSHA
	}
	if commit == "" {
		commit = mr.SHA
	}
	if !CanMove(StepCode(op.Step), HandleMerged) {
		return fmt.Errorf("merge request !%d is merged but %s cannot move to MERGED: %w", op.MRIID, StepCode(op.Step), ErrIllegalTransition)
	}
	_, err := e.Transition(ctx, op, HandleMerged, TransitionOpts{Source: source,
		Payload: map[string]any{"merge_commit_sha": commit},
		Update:  func(o *store.Operation) { o.MergeCommitSHA, o.Detail = commit, "" }})
	if errors.Is(err, ErrIllegalTransition) {
		return err
	}
	return err
}
