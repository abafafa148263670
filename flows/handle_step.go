package flows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"changebot/flows/commitgate"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

// handle runs the handle phase (DESIGN §3 step 6), one step per job run:
// approve as each reviewer robot, merge with the head sha, rebase when
// GitLab asks for it. It always reads GitLab first; remote state wins.
func (e handleWorker) handle(ctx context.Context, op store.Operation) error {
	switch rules.StepCode(op.Step) {
	case rules.CreateSucceeded:
		_, err := e.Transition(ctx, op, rules.HandleStarted, TransitionOpts{Source: "job:" + rules.KindHandle})
		return err
	case rules.HandleStarted:
		return e.approve(ctx, op)
	case rules.HandleApproved:
		return e.merge(ctx, op)
	case rules.HandleRebasing:
		return e.pollRebase(ctx, op)
	case rules.HandleDraft:
		return e.pollDraft(ctx, op)
	case rules.HandleQueued:
		return e.queueTurn(ctx, op)
	case rules.HandleInTrain:
		return e.pollTrain(ctx, op)
	}
	return nil
}

// readOpenMR reads the MR and settles the cases where there is nothing to
// do: already merged (finish as merged, never approve again), closed
// (failure), being merged (locked: look again shortly), retargeted by a
// person (HANDLE_RETARGETED: the approvals and the binding were given for
// the submitted target), head moved (back to waiting for the new head's
// pipeline). Every approve, merge and rebase reads the MR here first. done
// reports that the caller must stop and return err.
func (e handleWorker) readOpenMR(ctx context.Context, op store.Operation, includeRebase bool) (platform.MergeRequest, bool, error) {
	mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, includeRebase)
	if err != nil {
		return mr, true, notFoundIs(err, rules.WordsOf(op.Platform), rules.HandleFailed, "%s no longer exists", rules.WordsOf(op.Platform).MRRef(op.MRIID))
	}
	switch {
	case mr.State == platform.MRStateMerged:
		return mr, true, e.finishMerged(ctx, op, mr, "job:"+rules.KindHandle)
	case mr.State == platform.MRStateClosed:
		return mr, true, e.closedByPerson(ctx, op, mr.ClosedBy.Username, "job:"+rules.KindHandle)
	case mr.State == platform.MRStateLocked:
		return mr, true, snoozeFor(e.pollFor(op).ShortInterval) // GitLab is merging it right now
	case retargeted(op, mr.TargetBranch):
		return mr, true, e.stopRetargeted(ctx, op, mr.TargetBranch, "job:"+rules.KindHandle)
	case mr.SHA != "" && op.HeadSHA != "" && mr.SHA != op.HeadSHA && !mr.RebaseInProgress:
		return mr, true, e.headMoved(ctx, op, mr.SHA)
	}
	return mr, false, nil
}

// retargeted reports whether the platform shows the change's merge request
// targeting another branch (target, platform.MergeRequest.TargetBranch:
// GitLab's target_branch, GitHub's base.ref) than the one it was submitted
// for (store.Operation.TargetBranch). An unknown branch on either side ("")
// is no evidence.
func retargeted(op store.Operation, target string) bool {
	return target != "" && op.TargetBranch != "" && target != op.TargetBranch
}

// retargetedDetail is the detail of a change stopped in HANDLE_RETARGETED,
// in the words of its platform: "!1 now targets production; retarget it to
// main and comment /retry, or /cancel".
func retargetedDetail(op store.Operation, target string) string {
	return fmt.Sprintf("%s now targets %s; retarget it to %s and comment /retry, or /cancel",
		rules.WordsOf(op.Platform).Ref(op.MRIID), target, op.TargetBranch)
}

// stopRetargeted stops a change whose merge request a person retargeted
// onto target (issue 21 point 1) in HANDLE_RETARGETED, with no write to the
// platform. A change that cannot move there (it is no longer in the handle
// phase, or another writer moved it first) stays as it is: a replayed hook
// or a late job changes nothing.
func (e *Engine) stopRetargeted(ctx context.Context, op store.Operation, target, source string) error {
	if !rules.CanMove(rules.StepCode(op.Step), rules.HandleRetargeted) {
		return nil
	}
	e.opLog(op).Info("merge request retargeted by a person: stopping", "target_branch", target, "submitted_target_branch", op.TargetBranch)
	_, err := e.Transition(ctx, op, rules.HandleRetargeted, TransitionOpts{Source: source,
		Payload: map[string]any{"target_branch": target, "submitted_target_branch": op.TargetBranch},
		Update:  func(o *store.Operation) { o.Detail = retargetedDetail(op, target) }})
	if isConflict(err) {
		return nil
	}
	return err
}

// headMoved sends the change back to wait for the pipeline of the new head.
func (e handleWorker) headMoved(ctx context.Context, op store.Operation, head string) error {
	_, err := e.Transition(ctx, op, rules.HandleAwaitPipeline, TransitionOpts{Source: "job:" + rules.KindHandle,
		Payload: map[string]any{"head_sha": head, "previous_head_sha": op.HeadSHA},
		Update:  func(o *store.Operation) { o.HeadSHA = head }})
	return err
}

// shaMismatch handles platform.ErrHeadMoved (409 "SHA does not match HEAD of source branch") on
// approve or merge: read the MR again and wait for the pipeline of the new
// head. Should GitLab still show the head we sent, it is one more round.
func (e handleWorker) shaMismatch(ctx context.Context, op store.Operation) error {
	_, done, err := e.readOpenMR(ctx, op, false)
	if done {
		return err
	}
	return e.nextRound(ctx, op, rules.HandleAwaitPipeline, "sha_mismatch", "")
}

// nextRound starts another round of the handle phase at step to (approvals
// again, or the pipeline wait), or gives up once merge.max_rounds rounds are
// used: GitLab kept refusing for a reason that should have cleared.
// refusal, when not "", is the platform's own words for its last refusal
// (GitHub's 405 message): the round's event and the final detail carry it.
func (e handleWorker) nextRound(ctx context.Context, op store.Operation, to rules.StepCode, reason, refusal string) error {
	w := rules.WordsOf(op.Platform)
	if op.Rounds >= e.pollFor(op).MaxRounds {
		if refusal != "" {
			return failTo(rules.HandleNotMergeable, "%s still answers %s for %s after %d rounds: %s", w.Platform, reason, w.Ref(op.MRIID), op.Rounds, refusal)
		}
		return failTo(rules.HandleNotMergeable, "%s still answers %s for %s after %d rounds", w.Platform, reason, w.Ref(op.MRIID), op.Rounds)
	}
	payload := map[string]any{"reason": reason, "round": op.Rounds + 1}
	if refusal != "" {
		payload["refusal"] = refusal
	}
	_, err := e.Transition(ctx, op, to, TransitionOpts{Source: "job:" + rules.KindHandle,
		Payload: payload,
		Update:  func(o *store.Operation) { o.Rounds++ }})
	return err
}

// approve approves as every reviewer robot that has not approved the head
// yet (DESIGN §5). Before each attempt it reads who approved (fail-open: an
// unreadable list counts as nobody), approves with the head sha, and after
// platform.ErrForbidden (401, 403) reads once more, since GitLab answers 401
// both for "already approved" and "not allowed": a reviewer that still has
// not approved ends the change in HANDLE_REVIEWER_DENIED at once (no
// retries); a list that cannot be read is retried like a transient failure.
// A 5xx or network error is retried for that reviewer alone, on its own
// exponential backoff, at most ApproveMaxRetries times, recorded as attempt
// events; the other reviewers go on meanwhile. A 429 spends none of that
// budget: the step waits out the account's rate limit. After the last failure the
// approvals are read once more (the call may have taken effect) before the
// change fails. A refused or last call whose read is held back (429, the
// call budget) is not made again: the next run reads (approveReadHeld). When
// GitLab behaves this makes at most one approve call per reviewer per head
// sha.
func (e handleWorker) approve(ctx context.Context, op store.Operation) error {
	mr, done, err := e.readOpenMR(ctx, op, false)
	if done {
		return err
	}
	attempts, err := e.approveAttempts(ctx, op)
	if err != nil {
		return err
	}
	if attempts.pipelineUnconfirmed && !pipelineConfirmed(op, mr) {
		// The pipeline webhook that moved the change is not the merge
		// request's head pipeline, or that one has not passed: wait for
		// the head's pipeline, whose poll reads the MR. The webhook's
		// pipeline id is forgotten: it must not make the head's own
		// pipeline look older than the one waited for.
		_, err := e.Transition(ctx, op, rules.HandleAwaitPipeline, TransitionOpts{Source: "job:" + rules.KindHandle,
			Payload: map[string]any{"reason": "pipeline_not_confirmed", "unconfirmed_pipeline_id": op.PipelineID, "head_sha": mr.SHA},
			Update:  func(o *store.Operation) { o.PipelineID, o.PipelineURL = 0, "" }})
		return err
	}
	approved, readErr := map[int64]bool{}, error(nil)
	readFirst := approvalsReadFirst(rules.WordsOf(op.Platform), op.Rounds, attempts, repeatedRun(ctx))
	if readFirst {
		approved, readErr = e.readApprovals(ctx, op)
	}
	switch {
	case errors.Is(readErr, platform.ErrRateLimited):
		// Assuming "none approved" here would send approvals GitLab
		// already has: wait out the account's rate limit and read again.
		d, _ := platform.RateLimitWait(readErr)
		return snoozeFor(d)
	case readErr != nil:
		e.opLog(op).Warn("reading approvals failed, assuming none", "err", readErr)
		approved = map[int64]bool{}
	}
	p := e.pollFor(op)
	backoff := approveBackoff(p)
	var wait time.Duration
	approvedNow := false
	for i := range e.gl.ReviewerCount() {
		u, err := e.gl.Reviewer(ctx, i)
		if err == nil && approved[u.ID] {
			continue
		}
		if err == nil {
			// A call GitLab already answered is not made again while only
			// the read that follows it is missing (approveReadHeld): the
			// approvals read above is that read.
			if status := attempts.refused(i, mr.SHA); status != 0 {
				if readErr == nil {
					return failTo(rules.HandleReviewerDenied, "reviewer robot %s may not approve %s: %s answered %d (token revoked or expired, or the account is not eligible to approve)", reviewerName(i, u), rules.WordsOf(op.Platform).Ref(op.MRIID), rules.WordsOf(op.Platform).Platform, status)
				}
				err = &approvalsUnreadable{w: rules.WordsOf(op.Platform), status: status, err: readErr}
			} else if n := attempts.failures(i, mr.SHA); n > maxApproveRetries(p) {
				return failTo(rules.HandleFailed, "approving as %s failed %d times: %s", reviewerName(i, u), n, attempts.lastDetail(i, mr.SHA))
			} else if d := attempts.notBefore(i, mr.SHA, backoff).Sub(e.now()); d > 0 {
				wait = minWait(wait, d) // still backing off
				continue
			} else {
				err = e.gl.Approve(ctx, i, op.ProjectID, op.MRIID, mr.SHA)
			}
		}
		name := reviewerName(i, u)
		if errors.Is(err, platform.ErrForbidden) && u.ID != 0 {
			// GitLab answers 401 both to "already approved" and to "not
			// allowed": only the approvals tell which. While they cannot
			// be read, the reviewer is retried within its budget
			// (issue 9 defect 13).
			now, rerr := e.readApprovals(ctx, op)
			if rerr == nil && now[u.ID] {
				continue // the 401 meant "already approved"
			}
			switch {
			case errors.Is(rerr, platform.ErrRateLimited):
				// GitLab's "later": wait it out, spending no budget, and
				// read then without approving again.
				if err := e.approveReadHeld(ctx, op, i, name, mr.SHA, platform.StatusOf(err)); err != nil {
					return err
				}
				err = rerr
			case rerr != nil:
				err = &approvalsUnreadable{w: rules.WordsOf(op.Platform), status: platform.StatusOf(err), err: rerr}
			}
		}
		switch {
		case err == nil:
			approvedNow = true
		case errors.Is(err, platform.ErrHeadMoved):
			return e.shaMismatch(ctx, op)
		case errors.Is(err, platform.ErrForbidden):
			return failTo(rules.HandleReviewerDenied, "reviewer robot %s may not approve %s: %s answered %d (token revoked or expired, or the account is not eligible to approve)", name, rules.WordsOf(op.Platform).Ref(op.MRIID), rules.WordsOf(op.Platform).Platform, platform.StatusOf(err))
		case errors.Is(err, platform.ErrRateLimited):
			// GitLab's "later" spends no retry budget: wait out the
			// account's rate limit (issue 10 point 4).
			d, _ := platform.RateLimitWait(err)
			wait = minWait(wait, d)
		case platform.IsTransient(err):
			n := attempts.failures(i, mr.SHA) + 1
			if err := e.recordApproveFailure(ctx, op, i, name, mr.SHA, n, err); err != nil {
				return err
			}
			if n > maxApproveRetries(p) {
				now, rerr := e.readApprovals(ctx, op)
				switch {
				case rerr == nil && u.ID != 0 && now[u.ID]:
					continue // the last call took effect after all
				case errors.Is(rerr, platform.ErrRateLimited):
					// Read once the wait is over, without approving
					// again: the recorded attempts are used up.
					d, _ := platform.RateLimitWait(rerr)
					wait = minWait(wait, d)
					continue
				case rerr != nil:
					e.opLog(op).Warn("reading approvals failed, assuming none", "err", rerr)
				}
				return failTo(rules.HandleFailed, "approving as %s failed %d times: %s", name, n, failureDetail(rules.WordsOf(op.Platform), err))
			}
			d := max(backoff(n), platform.RetryAfterOf(err))
			wait = minWait(wait, d)
		default:
			return failTo(rules.HandleFailed, "approving as %s: %s", name, failureDetail(rules.WordsOf(op.Platform), err))
		}
	}
	if wait > 0 {
		if approvedNow && !readFirst {
			if err := e.approvePartial(ctx, op, mr.SHA); err != nil {
				return err
			}
		}
		return snoozeFor(wait)
	}
	_, err = e.Transition(ctx, op, rules.HandleApproved, TransitionOpts{Source: "job:" + rules.KindHandle,
		Payload: map[string]any{"head_sha": mr.SHA, "reviewers": e.gl.ReviewerCount()}})
	return err
}

func reviewerName(i int, u platform.User) string {
	if u.Username != "" {
		return u.Username
	}
	return fmt.Sprintf("#%d", i+1)
}

func minWait(cur, d time.Duration) time.Duration {
	if cur == 0 || d < cur {
		return d
	}
	return cur
}

// maxApproveRetries is PollConfig.ApproveMaxRetries with its zero default.
func maxApproveRetries(p PollConfig) int {
	if p.ApproveMaxRetries == 0 {
		return DefaultApproveMaxRetries
	}
	return max(p.ApproveMaxRetries, 0)
}

// approveBackoff returns the wait after the n-th failed approve of one
// reviewer: ShortInterval doubled per failure, at most LongInterval.
func approveBackoff(p PollConfig) func(n int) time.Duration {
	return func(n int) time.Duration {
		d := p.ShortInterval
		for i := 1; i < n && d < p.LongInterval; i++ {
			d *= 2
		}
		return min(d, max(p.LongInterval, p.ShortInterval))
	}
}

// approveAttempt is the payload of an EventAttempt for an approve call:
// action "approve" a failed call (Detail says how), "approve_refused" a
// call GitLab refused (Status, 401 or 403) whose approvals read was held
// back by a rate limit (approveReadHeld).
type approveAttempt struct {
	Action   string `json:"action"`
	Reviewer int    `json:"reviewer"`
	HeadSHA  string `json:"head_sha"`
	Attempt  int    `json:"attempt"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	at       time.Time
}

// approveAttempts are the failed approve calls recorded since the
// operation last moved, and the refused ones still to be read.
type approveAttempts struct {
	list, refusals []approveAttempt
	// approvedBefore: a run of the step approved as some reviewers and then
	// waited (an "approve_partial" attempt, see approvePartial).
	approvedBefore bool
	// pipelineUnconfirmed: the newest pipeline decision of the change was
	// taken on its webhook's word (pipelineHookTrusted).
	pipelineUnconfirmed bool
}

// refused returns the status of reviewer's refused approve at sha whose
// approvals read is still to be made, 0 when there is none.
func (a *approveAttempts) refused(reviewer int, sha string) int {
	for _, x := range a.refusals {
		if x.Reviewer == reviewer && x.HeadSHA == sha {
			return x.Status
		}
	}
	return 0
}

// lastDetail is how reviewer's last failed approve at sha failed.
func (a *approveAttempts) lastDetail(reviewer int, sha string) string {
	d := ""
	for _, x := range a.list {
		if x.Reviewer == reviewer && x.HeadSHA == sha {
			d = x.Detail
		}
	}
	return d
}

// approveReadHeld records that reviewer i's approve at sha was refused with
// status and the approvals read that tells "already approved" from "not
// allowed" was held back (a 429 or the call budget): the next run reads
// them without approving again. Waiting and approving again would send
// one more approve per wait, as many as the rate limit lasts.
func (e handleWorker) approveReadHeld(ctx context.Context, op store.Operation, i int, name, sha string, status int) error {
	_, err := e.st.AppendEvent(ctx, op.ID, store.EventParams{Type: store.EventAttempt, Actor: ActorBot, Source: "job:" + rules.KindHandle,
		Payload: map[string]any{"action": "approve_refused", "reviewer": i, "username": name, "head_sha": sha, "status": status}})
	if err != nil {
		return fmt.Errorf("recording the refused approve of %s: %w", name, err)
	}
	return nil
}

func (e handleWorker) approveAttempts(ctx context.Context, op store.Operation) (*approveAttempts, error) {
	events, err := e.st.ListEvents(ctx, e.st.DB(), op.ID)
	if err != nil {
		return nil, fmt.Errorf("reading approve attempts of %s: %w", op.ID, err)
	}
	out := &approveAttempts{}
	for _, ev := range events {
		switch ev.Type {
		case store.EventTransition:
			out.list, out.refusals = out.list[:0], out.refusals[:0] // a new step: a fresh budget
			var decided map[string]any
			if json.Unmarshal(ev.Payload, &decided) == nil && decided["pipeline_status"] != nil {
				out.pipelineUnconfirmed = decided[pipelineUnconfirmed] == true
			}
		case store.EventAttempt:
			var a approveAttempt
			if json.Unmarshal(ev.Payload, &a) != nil {
				continue
			}
			a.at = ev.OccurredAt
			switch a.Action {
			case "approve":
				out.list = append(out.list, a)
			case "approve_refused":
				out.refusals = append(out.refusals, a)
			case "approve_partial":
				out.approvedBefore = true
			}
		}
	}
	return out, nil
}

func (a *approveAttempts) failures(reviewer int, sha string) int {
	n := 0
	for _, x := range a.list {
		if x.Reviewer == reviewer && x.HeadSHA == sha {
			n++
		}
	}
	return n
}

// notBefore is when reviewer may be tried again: its last failure plus its
// backoff (zero time when it has not failed).
func (a *approveAttempts) notBefore(reviewer int, sha string, backoff func(int) time.Duration) time.Time {
	var last time.Time
	n := 0
	for _, x := range a.list {
		if x.Reviewer == reviewer && x.HeadSHA == sha {
			last, n = x.at, n+1
		}
	}
	if n == 0 {
		return time.Time{}
	}
	return last.Add(backoff(n))
}

func (e handleWorker) recordApproveFailure(ctx context.Context, op store.Operation, i int, name, sha string, n int, cause error) error {
	_, err := e.st.AppendEvent(ctx, op.ID, store.EventParams{Type: store.EventAttempt, Actor: ActorBot, Source: "job:" + rules.KindHandle,
		Payload: map[string]any{"action": "approve", "reviewer": i, "username": name, "head_sha": sha, "attempt": n,
			"status": platform.StatusOf(cause), "detail": failureDetail(rules.WordsOf(op.Platform), cause)}})
	return err
}

// pipelineConfirmed reports whether merge request mr, read before
// approving, confirms a pipeline success taken on its webhook's word
// (pipelineHookTrusted): its head pipeline is the change's pipeline and
// passed, at the change's head.
func pipelineConfirmed(op store.Operation, mr platform.MergeRequest) bool {
	hp := headPipeline(mr)
	return hp != nil && hp.ID == op.PipelineID && hp.Status == platform.PipelineSuccess && mr.SHA == op.HeadSHA
}

// approvalsReadFirst reports whether the approve step reads who approved
// before approving. On GitLab the first run of the first round of a change
// with no approve attempt recorded since it last moved does not: no robot
// can have approved its head yet (issue 24 point 3: no read that a write's
// answer gives). It reads first, so that it makes at most one approve call
// per reviewer and head sha, in a later round (the head moved and GitLab may
// have kept the approvals), after a recorded attempt or refusal (its read
// decides whether a reviewer was denied) or a partial run (approvePartial),
// in a repeated run of its job (repeated: a run that failed or was killed
// may have approved), and on GitHub, where a second approving review is
// accepted as another review rather than refused.
func approvalsReadFirst(w rules.Words, rounds int, a *approveAttempts, repeated bool) bool {
	return w.OnGitHub() || rounds > 0 || repeated || len(a.list) > 0 || len(a.refusals) > 0 || a.approvedBefore
}

// approvePartial records that this run of the approve step approved as some
// reviewers and waits before approving as the others (a 429 spends no
// attempt and records none): the next run then reads the approvals first
// instead of approving again as those reviewers (approvalsReadFirst).
func (e handleWorker) approvePartial(ctx context.Context, op store.Operation, sha string) error {
	_, err := e.st.AppendEvent(ctx, op.ID, store.EventParams{Type: store.EventAttempt, Actor: ActorBot, Source: "job:" + rules.KindHandle,
		Payload: map[string]any{"action": "approve_partial", "head_sha": sha}})
	if err != nil {
		return fmt.Errorf("recording the approvals given before waiting: %w", err)
	}
	return nil
}

// readApprovals reads the ids of the users who approved the change's MR.
func (e *Engine) readApprovals(ctx context.Context, op store.Operation) (map[int64]bool, error) {
	users, err := e.gl.Approvals(ctx, op.ProjectID, op.MRIID)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]bool, len(users))
	for _, u := range users {
		out[u.ID] = true
	}
	return out, nil
}

// approvalsUnreadable is an approve GitLab refused with status (401 or
// 403) while the approvals that would tell "already approved" from "not
// allowed" could not be read (err). It is retried like a transient failure
// (it deliberately does not unwrap: neither the refusal nor the read's
// error decides on its own).
type approvalsUnreadable struct {
	w      rules.Words // the change's platform's
	status int
	err    error
}

func (a *approvalsUnreadable) Error() string {
	return fmt.Sprintf("%s answered %d to the approval and the approvals could not be read: %s", a.w.Platform, a.status, failureDetail(a.w, a.err))
}

// merge merges with the head sha, the way the project requires, and acts
// on GitLab's answer (GITLAB-FACTS §2.6). It reads the MR with
// rebase_in_progress first: it never merges, nor rebases, while a rebase
// runs. An MR GitLab already shows as need_rebase is rebased without a
// doomed merge call (GitLab shows need_rebase only under the merge methods
// ff and rebase_merge). Squashing follows the MR's squash flag, which the
// create step set from the project's squash option (always and default_on
// squash): one read of the MR, no read of the project (issue 12 point 3).
func (e handleWorker) merge(ctx context.Context, op store.Operation) error {
	train, err := e.mergeTrains(ctx, op)
	if err != nil {
		return err
	}
	if train {
		// The platform's own merge train is the queue where there is
		// one; an operator's freeze still holds its changes back.
		if done, err := e.trainFrozen(ctx, op); done {
			return err
		}
	} else if proceed, err := e.queueGate(ctx, op); !proceed || err != nil {
		return err
	}
	mr, done, err := e.readOpenMR(ctx, op, true)
	if done {
		return err
	}
	r, pending, err := e.pendingRefusal(ctx, op, mr.SHA)
	if err != nil {
		return err
	}
	if pending {
		return e.followRefusal(ctx, op, r, true)
	}
	if mr.RebaseInProgress {
		return e.toRebasing(ctx, op, mr.SHA, false)
	}
	if train {
		return e.joinTrain(ctx, op, mr)
	}
	if mr.DetailedMergeStatus == "need_rebase" {
		return e.startRebase(ctx, op, mr)
	}
	defers, err := e.defersCI(ctx, op)
	if err != nil {
		return err
	}
	if pipelineDeferred(defers, mr) {
		return e.runDeferredPipeline(ctx, op, mr.SHA, "job:"+rules.KindHandle)
	}
	if hp := headPipeline(mr); hp != nil && hp.Finished() && hp.Status != platform.PipelineSuccess {
		// Only a /retry or /resume brings a change here with its head's
		// pipeline failed (or skipped): the merge would be refused, so the
		// head's pipeline runs again first.
		return e.startHeadPipeline(ctx, op, mr.SHA, "job:"+rules.KindHandle, "pipeline_rerun", func() (platform.Pipeline, error) {
			return e.rerunHeadPipeline(ctx, op)
		})
	}
	squash := mr.Squash
	lease, err := e.claimMerge(ctx, op, mr.SHA)
	if err != nil {
		return err
	}
	params := platform.MergeParams{SHA: mr.SHA, Squash: squash}
	if squash && defers {
		// The squash commit lands on the target branch: it gets the
		// change's message without the [skip ci] line, whatever the
		// project's squash template copies, so that the target's
		// pipeline (the deploy) runs (rules.SkipCIMarker).
		params.CommitMessage = commitMessage(op, false)
	}
	res, err := e.gl.Merge(ctx, op.ProjectID, op.MRIID, params)
	switch {
	case err == nil && res.State == platform.MRStateMerged:
		return e.finishMerged(ctx, op, res, "job:"+rules.KindHandle)
	case err == nil:
		return e.mergeLeftOpen(ctx, op, res, lease)
	case platform.NotApplied(err):
		// GitLab refused, or never processed the call: nothing merged.
		e.releaseMerge(ctx, op, lease, fmt.Sprintf("%s answered %d", rules.WordsOf(op.Platform).Platform, platform.StatusOf(err)))
	default:
		// 5xx, a timeout or a lost answer: the merge may have happened.
		// GitLab's state decides; while it cannot be read the claim stays
		// and is taken over once older than the job timeout.
		if now, rerr := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, false); rerr == nil {
			switch now.State {
			case platform.MRStateMerged:
				return e.finishMerged(ctx, op, now, "job:"+rules.KindHandle)
			case platform.MRStateOpened:
				e.releaseMerge(ctx, op, lease, "the merge call failed and the "+rules.WordsOf(op.Platform).MR+" is still open")
			}
		}
		return err
	}
	switch {
	case errors.Is(err, platform.ErrHeadMoved):
		return e.followRefusal(ctx, op, mergeRefusal{HeadSHA: mr.SHA, Reason: refusedHeadMoved}, false)
	case errors.Is(err, platform.ErrNotMergeable):
		return e.followRefusal(ctx, op, mergeRefusal{HeadSHA: mr.SHA, Reason: refusedNotMergeable, Refusal: refusalOf(op, err)}, false)
	case errors.Is(err, platform.ErrForbidden):
		return failTo(rules.HandleNotMergeable, "the robot may not merge %s into %s (%s answered %d)", rules.WordsOf(op.Platform).Ref(op.MRIID), op.TargetBranch, rules.WordsOf(op.Platform).Platform, platform.StatusOf(err))
	default:
		return err
	}
}

// Reasons of a mergeRefusal.
const (
	refusedHeadMoved    = "head_moved"    // platform.ErrHeadMoved (409)
	refusedNotMergeable = "not_mergeable" // platform.ErrNotMergeable (405, 406, 422)
)

// mergeRefusal is a merge call the platform refused at HeadSHA (Reason,
// and Refusal: refusalOf's words) whose follow-up (shaMismatch,
// notMergeable) has not finished; the payload of an EventAttempt with
// action "merge_refused".
type mergeRefusal struct {
	Action  string `json:"action"`
	HeadSHA string `json:"head_sha"`
	Reason  string `json:"reason"`
	Refusal string `json:"refusal,omitempty"`
}

// followRefusal acts on a merge refusal r: shaMismatch or notMergeable,
// which read the MR again to decide. When that cannot finish (the read
// answered 5xx or 429, the call budget held it back, the store failed), the
// job is retried, and the retry must not call merge again: GitLab already
// answered that call, and under a held or failing read every retry would
// send one more merge ("one merge call per refusal", issue 4 point 2). So
// the refusal is recorded (an EventAttempt "merge_refused") and merge takes
// its follow-up up again instead of merging (pending: r was read from that
// record). A follow-up that decides to merge again later (backing off while
// GitLab computes mergeability, a merge request being merged) records that
// the refusal is settled ("merge_refusal_followed"); one that moves the
// change needs nothing, a transition ends every record.
func (e handleWorker) followRefusal(ctx context.Context, op store.Operation, r mergeRefusal, pending bool) error {
	var err error
	if r.Reason == refusedHeadMoved {
		err = e.shaMismatch(ctx, op)
	} else {
		err = e.notMergeable(ctx, op, r.Refusal)
	}
	var sn *snooze
	var sf *stepFailure
	action := ""
	switch {
	case err == nil, errors.As(err, &sf):
	case errors.As(err, &sn):
		if pending {
			action = "merge_refusal_followed"
		}
	default:
		if !pending {
			action = "merge_refused"
		}
	}
	if action == "" {
		return err
	}
	payload := map[string]any{"action": action, "head_sha": r.HeadSHA, "reason": r.Reason}
	if r.Refusal != "" {
		payload["refusal"] = r.Refusal
	}
	if _, aerr := e.st.AppendEvent(ctx, op.ID, store.EventParams{Type: store.EventAttempt, Actor: ActorBot,
		Source: "job:" + rules.KindHandle, Payload: payload}); aerr != nil {
		return errors.Join(err, fmt.Errorf("recording the merge refusal of !%d: %w", op.MRIID, aerr))
	}
	return err
}

// pendingRefusal returns the merge refusal at head sha whose follow-up has
// not finished (followRefusal), if the change has one since it last moved.
func (e handleWorker) pendingRefusal(ctx context.Context, op store.Operation, sha string) (mergeRefusal, bool, error) {
	events, err := e.st.ListEvents(ctx, e.st.DB(), op.ID)
	if err != nil {
		return mergeRefusal{}, false, fmt.Errorf("reading the merge refusals of %s: %w", op.ID, err)
	}
	var last mergeRefusal
	pending := false
	for _, ev := range events {
		switch ev.Type {
		case store.EventTransition:
			pending = false
		case store.EventAttempt:
			var r mergeRefusal
			if json.Unmarshal(ev.Payload, &r) != nil {
				continue
			}
			switch r.Action {
			case "merge_refused":
				last, pending = r, r.HeadSHA == sha
			case "merge_refusal_followed":
				pending = false
			}
		}
	}
	return last, pending, nil
}

// mergeRef names the merge of op at head sha in the commit gate.
func mergeRef(op store.Operation, sha string) commitgate.Ref {
	return commitgate.Ref{RunID: op.ID, Step: "merge:" + sha}
}

// claimMerge claims the merge of op at head sha in the commit gate before
// the merge call, so that exactly one merge call per (operation, head sha)
// is made across replicas (DESIGN §6, issue 10 point 7), and records the
// claim as an EventClaim. A caller that loses the claim has just read the
// MR open (merge reads it first): it follows the winner by waiting and
// reading again (merged: finish as merged; still open: wait), never with a
// failure. A claim older than the job timeout on an MR still open was left
// by a replica that died between its claim and its call: it is taken over,
// by a delete conditional on that holder's token.
func (e handleWorker) claimMerge(ctx context.Context, op store.Operation, sha string) (commitgate.Lease, error) {
	c := commitgate.Commit{Ref: mergeRef(op, sha), Status: store.StatusMerged, Branch: op.TargetBranch, Seq: int64(op.Version)}
	lease, err := e.gate.Acquire(ctx, c)
	var stale *commitgate.Held
	if errors.Is(err, commitgate.ErrAlreadyCommitted) {
		held, ok, herr := e.gate.Holder(ctx, c.Ref)
		switch {
		case herr != nil:
			return lease, herr
		case !ok: // released meanwhile
			lease, err = e.gate.Acquire(ctx, c)
		case !e.now().Before(held.ClaimedAt.Add(e.cfg.JobTimeout)):
			stale = &held
			lease, err = e.gate.TakeOver(ctx, held, c)
		}
	}
	if errors.Is(err, commitgate.ErrAlreadyCommitted) {
		e.opLog(op).Info("merge claimed by another replica; reading the merge request again later", "head_sha", sha)
		return lease, snoozeFor(e.pollFor(op).ShortInterval)
	}
	if err != nil {
		return lease, fmt.Errorf("claiming the merge of !%d: %w", op.MRIID, err)
	}
	payload := map[string]any{"action": "merge_claimed", "gate_step": c.Ref.Step, "token": lease.Token, "head_sha": sha}
	if stale != nil {
		payload["took_over_token"] = stale.Token
		payload["took_over_claimed_at"] = stale.ClaimedAt
	}
	if _, err := e.st.AppendEvent(ctx, op.ID, store.EventParams{Type: store.EventClaim, Actor: ActorBot,
		Source: "job:" + rules.KindHandle, Payload: payload}); err != nil {
		e.releaseMerge(ctx, op, lease, "")
		return lease, err
	}
	return lease, nil
}

// releaseMerge releases the merge claim lease when the merge call failed
// before GitLab merged, so that a later attempt may claim again, and
// records why (reason; "" records nothing). It runs on a fresh bounded
// context: the job's may have expired. Failures are logged: the claim is
// then taken over once older than the job timeout.
func (e handleWorker) releaseMerge(ctx context.Context, op store.Operation, lease commitgate.Lease, reason string) {
	ctx, cancel := recordContext(ctx)
	defer cancel()
	released, err := e.gate.ReleaseLease(ctx, lease)
	if err != nil {
		e.opLog(op).Warn("releasing the merge claim failed", "err", err)
		return
	}
	if !released || reason == "" {
		return
	}
	if _, err := e.st.AppendEvent(ctx, op.ID, store.EventParams{Type: store.EventClaim, Actor: ActorBot, Source: "job:" + rules.KindHandle,
		Payload: map[string]any{"action": "merge_claim_released", "gate_step": lease.Ref.Step, "token": lease.Token, "reason": reason}}); err != nil {
		e.opLog(op).Warn("recording the merge claim release failed", "err", err)
	}
}

// SeedMergeClaims records in the commit gate the merges already recorded
// on changes that are MERGED (waiting for their deploy), so that the gate
// knows them after a restart or on a fresh claims table (DESIGN §6 "Seed").
// It returns how many it looked at. The bot calls it at start.
func (e *Engine) SeedMergeClaims(ctx context.Context) (int, error) {
	ops, err := e.st.ListOperationsByStatus(ctx, e.st.DB(), []string{store.StatusMerged},
		time.Time{}, e.now().Add(24*time.Hour), maxSeededMerges)
	if err != nil {
		return 0, fmt.Errorf("seeding merge claims: %w", err)
	}
	n := 0
	for _, op := range ops {
		if op.MergeCommitSHA == "" || op.HeadSHA == "" {
			continue
		}
		c := commitgate.Commit{Ref: mergeRef(op, op.HeadSHA), Status: store.StatusMerged, Branch: op.TargetBranch, Seq: int64(op.Version)}
		if err := e.gate.Seed(ctx, c); err != nil {
			return n, fmt.Errorf("seeding merge claims: %w", err)
		}
		n++
	}
	return n, nil
}

// maxSeededMerges bounds the merges SeedMergeClaims reads at start.
const maxSeededMerges = 10_000

// mergeLeftOpen handles a merge GitLab answered with 200 while the MR it
// returned is not merged (a project rule reported only in merge_error): it
// reads the MR once more, finishes as merged only if GitLab now shows it
// merged, and otherwise releases the merge claim and fails with GitLab's
// reason. It never merges again.
func (e handleWorker) mergeLeftOpen(ctx context.Context, op store.Operation, res platform.MergeRequest, lease commitgate.Lease) error {
	mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, false)
	if err == nil && mr.State == platform.MRStateMerged {
		return e.finishMerged(ctx, op, mr, "job:"+rules.KindHandle)
	}
	if err == nil {
		res = mr
		e.releaseMerge(ctx, op, lease, rules.WordsOf(op.Platform).Platform+" left the "+rules.WordsOf(op.Platform).MR+" "+orUnknown(mr.State))
	}
	return failTo(rules.HandleNotMergeable, "%s accepted the merge of %s but it stayed %s: %s", rules.WordsOf(op.Platform).Platform, rules.WordsOf(op.Platform).Ref(op.MRIID), orUnknown(res.State), orUnknown(res.MergeError))
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// mergeBlockers are the detailed_merge_status values that only people can
// clear, with the reason shown to them.
var mergeBlockers = map[string]string{
	"requested_changes":          "a reviewer requested changes",
	"discussions_not_resolved":   "not all discussions are resolved",
	"merge_request_blocked":      "it is blocked by another merge request",
	"jira_association_missing":   "the title or description must name a Jira issue",
	"security_policy_violations": "a security policy is violated",
	"status_checks_must_pass":    "external status checks have not passed",
	"commits_status":             "the source branch has no commits or is missing",
	"locked_paths":               "it changes locked paths",
	"locked_lfs_files":           "it changes locked LFS files",
	"merge_time":                 "its merge_after time has not come yet",
	"not_open":                   "it is not open",
}

// notMergeable re-reads the MR after platform.ErrNotMergeable and decides from its
// state and detailed_merge_status (GITLAB-FACTS §2.4, issue 4 point 2):
// still computing -> back off and merge again (until the rebase deadline,
// then HANDLE_MERGE_PENDING); need_rebase -> rebase; not_approved ->
// approvals again; ci_still_running -> wait for the head's pipeline;
// conflict -> HANDLE_REBASE_CONFLICT; a pipeline that failed ->
// HANDLE_FAILED; anything people must clear, or a rule GitLab reports only
// in merge_error while calling the MR mergeable -> HANDLE_NOT_MERGEABLE
// with that reason, written once and never retried in a loop.
//
// refusal is the merge answer's own reason where the platform gives it
// only there (refusalOf: GitHub's 405 message); it stands in for an empty
// merge_error of a blocked request and ends the detail of a change that
// runs out of rounds (a request read as mergeable after it still backs off
// and merges again: the 405 may have raced a check finishing).
func (e handleWorker) notMergeable(ctx context.Context, op store.Operation, refusal string) error {
	mr, done, err := e.readOpenMR(ctx, op, true)
	if done {
		return err
	}
	if mr.RebaseInProgress {
		return e.toRebasing(ctx, op, mr.SHA, false)
	}
	w := rules.WordsOf(op.Platform)
	status := mr.DetailedMergeStatus
	switch status {
	case "mergeable":
		if mr.MergeError != "" {
			return failTo(rules.HandleNotMergeable, "%s refuses to merge %s: %s", w.Platform, w.Ref(op.MRIID), mr.MergeError)
		}
		return e.backOffMerge(ctx, op, status)
	case "checking", "preparing", "unchecked", "approvals_syncing", "":
		return e.backOffMerge(ctx, op, status)
	case "need_rebase":
		return e.startRebase(ctx, op, mr)
	case "not_approved":
		return e.nextRound(ctx, op, rules.HandleStarted, status, refusal)
	case "ci_still_running":
		return e.nextRound(ctx, op, rules.HandleAwaitPipeline, status, refusal)
	case "ci_must_pass":
		return failTo(rules.HandleFailed, "the %s of %s did not pass", w.Pipeline, short(mr.SHA))
	case "conflict":
		return failTo(rules.HandleRebaseConflict, "%s has conflicts with %s", w.Ref(op.MRIID), op.TargetBranch)
	case draftStatus:
		return e.toDraft(ctx, op)
	}
	reason := status
	if r, ok := mergeBlockers[status]; ok {
		reason = r + " (" + status + ")"
	}
	switch {
	case mr.MergeError != "":
		reason += ": " + mr.MergeError
	case refusal != "":
		reason += ": " + refusal
	}
	return failTo(rules.HandleNotMergeable, "%s refuses to merge %s: %s", w.Platform, w.Ref(op.MRIID), reason)
}

// refusalOf is the reason a merge answered err (platform.ErrNotMergeable)
// gives in its own message, where only that message says it: on GitHub,
// whose pull request shows mergeable_state "blocked" alike for a missing
// review, a ruleset or any other rule (docs/github.md), the 405's message
// ("Repository rule violations found ...") is the only reason there is.
// GitLab says why in the merge request's merge_error and
// detailed_merge_status, its 405 message being the status line ("405
// Method Not Allowed"): "" there, so GitLab's texts stay as they are.
func refusalOf(op store.Operation, err error) string {
	var pe *platform.Error
	if store.PlatformOr(op.Platform) != store.PlatformGitHub || !errors.As(err, &pe) {
		return ""
	}
	return pe.Message
}

// draftStatus is the detailed_merge_status of a draft merge request.
const draftStatus = "draft_status"

// draftDetail is the detail of a change waiting in HANDLE_DRAFT, in w's
// words.
func draftDetail(w rules.Words) string {
	return "the " + w.MR + " is a draft: mark it ready in " + w.Platform
}

// toDraft parks the change in HANDLE_DRAFT after the merge found the MR a
// draft (issue 10 point 3): it waits for a person to mark it ready,
// without a deadline, spending no round and making no merge call meanwhile.
func (e handleWorker) toDraft(ctx context.Context, op store.Operation) error {
	_, err := e.Transition(ctx, op, rules.HandleDraft, TransitionOpts{Source: "job:" + rules.KindHandle,
		Payload: map[string]any{"detailed_merge_status": draftStatus},
		Update:  func(o *store.Operation) { o.Detail = draftDetail(rules.WordsOf(op.Platform)) }})
	return err
}

// pollDraft is HANDLE_DRAFT's poll, the fallback of the Merge Request Hook
// with changes.draft: while the MR is still a draft it looks again after
// the long interval; once it is not, the change goes back to merging.
// Merged, closed or a new head are settled as everywhere (readOpenMR).
func (e handleWorker) pollDraft(ctx context.Context, op store.Operation) error {
	mr, done, err := e.readOpenMR(ctx, op, false)
	if done {
		return err
	}
	if mr.DetailedMergeStatus == draftStatus {
		return snoozeFor(e.pollFor(op).LongInterval)
	}
	return e.draftReady(ctx, op, "job:"+rules.KindHandle)
}

// draftReady moves a change waiting in HANDLE_DRAFT back to merging.
func (e *Engine) draftReady(ctx context.Context, op store.Operation, source string) error {
	_, err := e.Transition(ctx, op, rules.HandleApproved, TransitionOpts{Source: source,
		Payload: map[string]any{"reason": "marked ready"},
		Update:  func(o *store.Operation) { o.Detail = "" }})
	return err
}

// backOffMerge waits while GitLab still computes mergeability, on the
// stepped schedule, until the rebase deadline (GitLab's asynchronous work on
// an MR); then the change parks in HANDLE_MERGE_PENDING for /resume.
func (e handleWorker) backOffMerge(ctx context.Context, op store.Operation, status string) error {
	p := e.pollFor(op)
	if d, ok := stepped(p, e.now(), op.StepStartedAt, p.RebaseDeadline); ok {
		return snoozeFor(d)
	}
	_, err := e.Transition(ctx, op, rules.HandleMergePending, TransitionOpts{Source: "job:" + rules.KindHandle,
		Payload: map[string]any{"detailed_merge_status": status},
		Update: func(o *store.Operation) {
			o.Detail = fmt.Sprintf("%s still reports %s for %s after %s", rules.WordsOf(op.Platform).Platform, orUnknown(status), rules.WordsOf(op.Platform).Ref(op.MRIID), p.RebaseDeadline)
		}})
	return err
}

// startRebase asks GitLab to rebase (202) and moves to HANDLE_REBASING; a
// bounded number of rounds per change. It never starts a second rebase
// while one runs: a running one (seen on mr, or GitLab's 409 "Failed to
// enqueue the rebase operation") is polled instead. A head that moved
// under the request (platform.ErrHeadMoved: GitHub's update-branch answers
// 422 "expected head sha didn't match current head ref", docs/github.md)
// is a push, not a refusal: shaMismatch reads the request again and the
// change waits for the new head's checks and approvals.
func (e handleWorker) startRebase(ctx context.Context, op store.Operation, mr platform.MergeRequest) error {
	if mr.RebaseInProgress {
		return e.toRebasing(ctx, op, mr.SHA, false)
	}
	if op.Rounds >= e.pollFor(op).MaxRounds {
		return failTo(rules.HandleFailed, "the target branch kept moving: gave up after %d rebase rounds", op.Rounds)
	}
	err := e.gl.Rebase(ctx, op.ProjectID, op.MRIID)
	switch {
	case errors.Is(err, platform.ErrHeadMoved):
		return e.shaMismatch(ctx, op)
	case err == nil, errors.Is(err, platform.ErrConflict):
	case platform.IsRefused(err):
		return failTo(rules.HandleFailed, "%s refuses to rebase %s: %s", rules.WordsOf(op.Platform).Platform, rules.WordsOf(op.Platform).Ref(op.MRIID), failureDetail(rules.WordsOf(op.Platform), err))
	default:
		return err
	}
	return e.toRebasing(ctx, op, mr.SHA, true)
}

// toRebasing moves to HANDLE_REBASING, where pollRebase watches the
// rebase; started counts a round. head is the MR's head sha the rebase
// was requested on (or seen running on): it is the change's HeadSHA in
// that step, in the database every replica shares, so that pollRebase
// knows the rebase has not landed while the head is still head (issue 21
// point 7: GitHub's update-branch has no progress flag, and a memory of
// one process's request is lost to a restart and unseen by the others).
func (e handleWorker) toRebasing(ctx context.Context, op store.Operation, head string, started bool) error {
	_, err := e.Transition(ctx, op, rules.HandleRebasing, TransitionOpts{Source: "job:" + rules.KindHandle,
		Payload: map[string]any{"rebase_requested": started, "head_sha": head},
		Update: func(o *store.Operation) {
			if head != "" {
				o.HeadSHA = head
			}
			if started {
				o.Rounds++
			}
		}, Delay: e.pollFor(op).ShortInterval})
	return err
}

// rebaseRunning reports whether the rebase a change in HANDLE_REBASING
// waits for is still running: the platform says so (GitLab's
// rebase_in_progress), or the MR's head is still the one the rebase was
// requested on (op.HeadSHA, recorded by toRebasing) while the platform
// still asks for an up-to-date head (need_rebase: GitLab's, or GitHub's
// mergeable_state "behind") or has not computed it yet (checking). A
// conflict or a GitLab merge_error is never a running rebase.
func rebaseRunning(op store.Operation, mr platform.MergeRequest) bool {
	if mr.RebaseInProgress {
		return true
	}
	if op.HeadSHA == "" || mr.SHA != op.HeadSHA || mr.HasConflicts || mr.MergeError != "" {
		return false
	}
	switch mr.DetailedMergeStatus {
	case "need_rebase", "checking", "unchecked", "preparing", "":
		return true
	}
	return false
}

// pollRebase waits for a running rebase on stepped intervals (MR read with
// include_rebase_in_progress=true), then sends the change to wait for the
// pipeline of the new head; a failed rebase is HANDLE_REBASE_CONFLICT; a
// rebase still running past the rebase deadline parks the change in
// HANDLE_REBASE_PENDING (/resume polls again).
func (e handleWorker) pollRebase(ctx context.Context, op store.Operation) error {
	mr, err := e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, true)
	if err != nil {
		return notFoundIs(err, rules.WordsOf(op.Platform), rules.HandleFailed, "%s no longer exists", rules.WordsOf(op.Platform).MRRef(op.MRIID))
	}
	switch {
	case mr.State == platform.MRStateMerged:
		return e.finishMerged(ctx, op, mr, "job:"+rules.KindHandle)
	case mr.State == platform.MRStateClosed:
		return e.closedByPerson(ctx, op, mr.ClosedBy.Username, "job:"+rules.KindHandle)
	case !mr.RebaseInProgress && (strings.Contains(mr.MergeError, "Rebase failed") || mr.HasConflicts || mr.DetailedMergeStatus == "conflict"):
		return failTo(rules.HandleRebaseConflict, "rebasing %s onto %s failed: %s", rules.WordsOf(op.Platform).Ref(op.MRIID), op.TargetBranch, orUnknown(mr.MergeError))
	case rebaseRunning(op, mr):
		p := e.pollFor(op)
		if d, ok := stepped(p, e.now(), op.StepStartedAt, p.RebaseDeadline); ok {
			return snoozeFor(d)
		}
		_, err := e.Transition(ctx, op, rules.HandleRebasePending, TransitionOpts{Source: "job:" + rules.KindHandle,
			Update: func(o *store.Operation) { o.Detail = "rebase still running after " + p.RebaseDeadline.String() }})
		return err
	}
	if defers, err := e.defersCI(ctx, op); err != nil {
		return err
	} else if pipelineDeferred(defers, mr) {
		// The rebased head carries the deferred commit's [skip ci]: the
		// head's pipeline is started here (its skipped one has no result).
		return e.runDeferredPipeline(ctx, op, mr.SHA, "job:"+rules.KindHandle)
	}
	_, err = e.Transition(ctx, op, rules.HandleAwaitPipeline, TransitionOpts{Source: "job:" + rules.KindHandle,
		Payload: map[string]any{"head_sha": mr.SHA, "rebased": true},
		Update:  func(o *store.Operation) { o.HeadSHA, o.Detail = mr.SHA, "" }})
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
	if !rules.CanMove(rules.StepCode(op.Step), rules.HandleMerged) {
		return fmt.Errorf("%s is merged but %s cannot move to MERGED: %w", rules.WordsOf(op.Platform).MRRef(op.MRIID), rules.StepCode(op.Step), rules.ErrIllegalTransition)
	}
	// Who merged it is in the event's payload; a person who merged it is
	// also the move's actor (the status comment's timeline) and named in
	// the detail (issue 10 point 2).
	payload := map[string]any{"merge_commit_sha": commit}
	detail, actor := "", ""
	if who := mr.MergedBy.Username; who != "" {
		payload["merged_by"] = who
		if !e.byRobot(ctx, who) {
			detail, actor = fmt.Sprintf("%s merged %s in %s", who, rules.WordsOf(op.Platform).Ref(op.MRIID), rules.WordsOf(op.Platform).Platform), who
		}
	}
	_, err := e.Transition(ctx, op, rules.HandleMerged, TransitionOpts{Source: source, Actor: actor,
		Payload: payload,
		Update:  func(o *store.Operation) { o.MergeCommitSHA, o.Detail = commit, detail }})
	return err
}

// closedByPerson ends a change whose merge request a person closed in
// GitLab (issue 10 point 1): MR_CLOSED, naming who closed it (who is "" when
// GitLab did not say; the robot's own close, a /cancel, is left to Cancel).
// A change that can no longer move there (finished, or already closed)
// stays as it is, so replayed hooks and later polls change nothing.
func (e *Engine) closedByPerson(ctx context.Context, op store.Operation, who, source string) error {
	if !rules.CanMove(rules.StepCode(op.Step), rules.ClosedByPerson) || (who != "" && e.byRobot(ctx, who)) {
		return nil
	}
	w := rules.WordsOf(op.Platform)
	detail := fmt.Sprintf("%s was closed in %s", w.MRRef(op.MRIID), w.Platform)
	if who != "" {
		detail = fmt.Sprintf("%s closed %s in %s", who, w.MRRef(op.MRIID), w.Platform)
	}
	_, err := e.Transition(ctx, op, rules.ClosedByPerson, TransitionOpts{Source: source, Actor: who,
		Payload: map[string]any{"closed_by": who, "mr_iid": op.MRIID},
		Update:  func(o *store.Operation) { o.Detail = detail }})
	if isConflict(err) {
		return nil
	}
	return err
}

// byRobot reports whether username is one of changebot's own accounts
// (the robot or a reviewer robot); an unreadable account list counts as a
// person.
func (e *Engine) byRobot(ctx context.Context, username string) bool {
	r, err := e.isRobot(ctx, platform.User{Username: username})
	return err == nil && r
}

// handlePlatform is what the handle phase (approve, rebase, merge) itself
// calls on the platform (issue 20 point 2: a step worker is given only the
// methods it calls); the engine's shared moves (Transition, failures) keep
// their own.
type handlePlatform interface {
	Approve(ctx context.Context, reviewer int, projectID, iid int64, sha string) error
	Merge(ctx context.Context, projectID, iid int64, p platform.MergeParams) (platform.MergeRequest, error)
	MergeRequest(ctx context.Context, projectID, iid int64, includeRebase bool) (platform.MergeRequest, error)
	Rebase(ctx context.Context, projectID, iid int64) error
	AddToMergeTrain(ctx context.Context, projectID, iid int64, sha string, squash bool) error
	MergeTrainCar(ctx context.Context, projectID, iid int64) (platform.TrainCar, error)
	Reviewer(ctx context.Context, i int) (platform.User, error)
	ReviewerCount() int
}

// handleStore is what the handle phase (approve, rebase, merge) itself calls
// on the store.
type handleStore interface {
	AppendEvent(ctx context.Context, operationID string, p store.EventParams, jobs ...river.InsertManyParams) (store.Event, error)
	DB() store.DBTX
	ListEvents(ctx context.Context, db store.DBTX, operationID string) ([]store.Event, error)
	GetOperation(ctx context.Context, db store.DBTX, id string) (store.Operation, error)
	GetQueue(ctx context.Context, db store.DBTX, key store.QueueKey, waitingStep, limit int) (store.Queue, error)
	ClaimQueueHead(ctx context.Context, db store.DBTX, p store.QueueHeadParams) (bool, error)
}

// handleWorker runs the handle phase (approve, rebase, merge) with
// handlePlatform and handleStore in place of the engine's whole platform and
// store.
type handleWorker struct {
	*Engine
	gl handlePlatform
	st handleStore
}

// handleWorker is e's handle phase (approve, rebase, merge) worker.
func (e *Engine) handleWorker() handleWorker { return handleWorker{Engine: e, gl: e.gl, st: e.st} }
