package flows

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

// QueueConfig is how the merge queue of a project's target branches works
// (issue 22), from the runtime settings queue.*.
type QueueConfig struct {
	// Mode is rules.QueueAuto (the default when ""), QueueOn or QueueOff.
	Mode string
	// PipelineRetries is how many times the pipeline of the queue's head
	// is run again after it failed before the change is blamed
	// (queue.pipeline_retries); a flaky job must not fail a change that
	// waited its turn. Negative means none.
	PipelineRetries int
	// DeferCI is queue.defer_ci: rules.DeferCIAuto (the default when ""),
	// DeferCIOn or DeferCIOff (rules.DefersCI).
	DeferCI string
}

// DefaultQueueConfig is the queue's configuration when
// EngineConfig.QueueFunc is nil.
var DefaultQueueConfig = QueueConfig{Mode: rules.QueueAuto, PipelineRetries: 1, DeferCI: rules.DeferCIAuto}

// Queues are the store's merge queue methods flows calls (part of Store).
type Queues interface {
	ClaimQueueHead(ctx context.Context, db store.DBTX, p store.QueueHeadParams) (bool, error)
	ReleaseQueueHead(ctx context.Context, db store.DBTX, key store.QueueKey, operationID string, waitingStep int, kinds []string, wake int) (string, bool, error)
	GetQueue(ctx context.Context, db store.DBTX, key store.QueueKey, waitingStep, limit int) (store.Queue, error)
	ListQueues(ctx context.Context, db store.DBTX, platform string, waitingStep int) ([]store.QueueSummary, error)
	FreezeQueue(ctx context.Context, key store.QueueKey, frozen bool, by, reason string) (store.Queue, error)
	MoveToQueueFront(ctx context.Context, operationID, by, reason string) error
}

// queueFor returns the queue configuration of op's project: the
// runtime settings, with the values of the branch's `.changebot.yml` the
// server allows (policy.allow_override) laid over them.
func (e *Engine) queueFor(op store.Operation) QueueConfig {
	c := DefaultQueueConfig
	if e.cfg.QueueFunc != nil {
		c = e.cfg.QueueFunc(op.Project)
	}
	c = e.applyQueuePolicy(op, c)
	if c.Mode == "" {
		c.Mode = rules.QueueAuto
	}
	return c
}

// queueKey names op's merge queue.
func queueKey(op store.Operation) store.QueueKey {
	return store.QueueKey{Platform: store.PlatformOr(op.Platform), ProjectID: op.ProjectID, TargetBranch: op.TargetBranch}
}

// needsQueue reports whether op waits in its branch's merge queue: by
// queue.mode, and under auto by the project's merge method as the platform
// answered it (read at most once per projectReadTTL, shared by every
// change of the project; rules.NeedsQueue).
func (e *Engine) needsQueue(ctx context.Context, op store.Operation) (bool, error) {
	mode := e.queueFor(op).Mode
	if mode != rules.QueueAuto || rules.WordsOf(op.Platform).OnGitHub() {
		return rules.NeedsQueue(mode, op.Platform, ""), nil
	}
	p, err := e.project(ctx, op.Project)
	if err != nil {
		return false, fmt.Errorf("reading the merge method of %s: %w", op.Project, err)
	}
	return rules.NeedsQueue(mode, op.Platform, p.MergeMethod), nil
}

// queueLimit bounds the waiting changes a queue read lists.
const queueLimit = 1000

// queueGate lets an approved change merge only from the head of its merge
// queue (issue 22 point 2): merge calls it before it reads the merge
// request. It returns proceed when the change may go on (no queue for its
// branch, or it holds the head); otherwise it has moved the change to
// HANDLE_QUEUED, or returned the error. A change that finds the head free
// and nobody waiting takes the head at once (one statement, no step of its
// own); a frozen queue is joined, never taken.
func (e handleWorker) queueGate(ctx context.Context, op store.Operation) (proceed bool, err error) {
	needs, err := e.needsQueue(ctx, op)
	if err != nil || !needs {
		return !needs, err
	}
	key := queueKey(op)
	q, err := e.st.GetQueue(ctx, e.st.DB(), key, int(rules.HandleQueued), queueLimit)
	if err != nil {
		return false, err
	}
	if q.HeadOperationID == op.ID {
		return true, nil
	}
	if q.HeadOperationID == "" && len(q.Waiting) == 0 && !q.Frozen() {
		ok, err := e.st.ClaimQueueHead(ctx, e.st.DB(), store.QueueHeadParams{Key: key, OperationID: op.ID})
		if err != nil || ok {
			if ok {
				e.opLog(op).Info("merge queue: took the head", "queue", key.String())
			}
			return ok, err
		}
		if q, err = e.st.GetQueue(ctx, e.st.DB(), key, int(rules.HandleQueued), queueLimit); err != nil {
			return false, err
		}
	}
	return false, e.joinQueue(ctx, op, q)
}

// trainFrozen reports, for a change of a project with merge trains (where
// the train is the queue), whether an operator froze its branch: then it
// waits in HANDLE_QUEUED until the branch is unfrozen (joinQueue), and
// is added to the train from there. done reports that the caller must
// stop and return err.
func (e handleWorker) trainFrozen(ctx context.Context, op store.Operation) (done bool, err error) {
	q, err := e.st.GetQueue(ctx, e.st.DB(), queueKey(op), int(rules.HandleQueued), queueLimit)
	if err != nil || !q.Frozen() || q.HeadOperationID == op.ID {
		return err != nil, err
	}
	return true, e.joinQueue(ctx, op, q)
}

// joinQueue moves op to HANDLE_QUEUED, at the end of q, its detail saying
// where it stands.
func (e handleWorker) joinQueue(ctx context.Context, op store.Operation, q store.Queue) error {
	key := queueKey(op)
	// A head that cannot be read is left out of the words, not an error:
	// the change joins the queue either way.
	head, hasHead, _ := e.queueHead(ctx, op, q)()
	ahead := aheadOf(op, q, len(q.Waiting)+1, head, hasHead)
	_, err := e.Transition(ctx, op, rules.HandleQueued, TransitionOpts{Source: "job:" + rules.KindHandle,
		Payload: map[string]any{"queue": key.TargetBranch, "position": len(ahead) + 1, "ahead": len(ahead)},
		Update:  func(o *store.Operation) { o.Detail = queueDetail(op, q, ahead) }})
	return err
}

// queueHead reads, once however often it is called, the change at q's
// head when it is not op: ok is false when there is none or it no longer
// exists; err is any other failure to read it.
func (e handleWorker) queueHead(ctx context.Context, op store.Operation, q store.Queue) func() (head store.Operation, ok bool, err error) {
	var (
		read bool
		head store.Operation
		ok   bool
		err  error
	)
	return func() (store.Operation, bool, error) {
		if !read && q.HeadOperationID != "" && q.HeadOperationID != op.ID {
			head, err = e.st.GetOperation(ctx, e.st.DB(), q.HeadOperationID)
			ok = err == nil
			if errors.Is(err, store.ErrNotFound) {
				err = nil
			}
		}
		read = true
		return head, ok, err
	}
}

// aheadOf lists the merge requests ahead of op when it stands at place
// among q's waiting changes: the head's (left out when there is none,
// hasHead false), then the waiting ones before it, in order.
func aheadOf(op store.Operation, q store.Queue, place int, head store.Operation, hasHead bool) []int64 {
	ahead := make([]int64, 0, place)
	if hasHead {
		ahead = append(ahead, head.MRIID)
	}
	for _, w := range q.Waiting[:min(place-1, len(q.Waiting))] {
		if w.ID != op.ID {
			ahead = append(ahead, w.MRIID)
		}
	}
	return ahead
}

// queueDetail says where a change in q stands, with the merge requests
// ahead of it (ahead, head first), when it may expect its merge by the
// queue's average turn (rules.QueueETA), and who froze the queue when it
// is frozen: "3rd in the merge queue for main, behind !41 and !42; about 2
// min".
func queueDetail(op store.Operation, q store.Queue, ahead []int64) string {
	w := rules.WordsOf(op.Platform)
	var b strings.Builder
	fmt.Fprintf(&b, "%s in the merge queue for %s", rules.QueuePlace(len(ahead)+1), op.TargetBranch)
	if n := len(ahead); n > 0 {
		refs := make([]string, 0, 3)
		for _, iid := range ahead[:min(n, 3)] {
			refs = append(refs, w.Ref(iid))
		}
		fmt.Fprintf(&b, ", behind %s", strings.Join(refs, ", "))
		if n > 3 {
			fmt.Fprintf(&b, " and %d more", n-3)
		}
	}
	if eta := rules.QueueETA(len(ahead), q.TurnAvg); eta != "" && !q.Frozen() {
		b.WriteString("; " + eta)
	}
	b.WriteString(frozenDetail(op, q))
	return b.String()
}

// frozenMark is the words of a waiting change's detail while its queue
// is frozen (queueDetail).
const frozenMark = "the queue is frozen by "

// frozenDetail is what a waiting change's detail adds while q is frozen:
// who froze it, why, and how it is unfrozen; "" when it is not frozen.
func frozenDetail(op store.Operation, q store.Queue) string {
	if !q.Frozen() {
		return ""
	}
	d := "; " + frozenMark + q.FrozenBy
	if q.FrozenReason != "" {
		d += " (" + q.FrozenReason + ")"
	}
	return d + ": nothing merges until an operator comments /unfreeze on one of its " + rules.WordsOf(op.Platform).MR + "s or unfreezes it through the API"
}

// noteQueueWait records, in the change's own step (no move), where it
// stands now: its queue was frozen or unfrozen (the detail names who froze
// it, an event says so), or it moved up near the head (event action
// queue_place, bookkeeping the timeline leaves out); the status comment is
// refreshed. A change that moved meanwhile is left alone. It returns the
// change as it is now (op when the write failed).
func (e handleWorker) noteQueueWait(ctx context.Context, op store.Operation, detail string, q store.Queue) store.Operation {
	wasFrozen := strings.Contains(op.Detail, frozenMark)
	action := "queue_place"
	payload := map[string]any{"queue": op.TargetBranch}
	switch {
	case q.Frozen() && !wasFrozen:
		action = "queue_frozen"
		payload["frozen_by"], payload["frozen_reason"] = q.FrozenBy, q.FrozenReason
	case !q.Frozen() && wasFrozen:
		action = "queue_unfrozen"
	}
	payload["action"] = action
	next, err := e.recordInStep(ctx, op, "job:"+rules.KindHandle, payload,
		func(o *store.Operation) { o.Detail = detail }, e.refreshNoteJobs(op, op.Version+1))
	if err != nil {
		if !isConflict(err) {
			e.opLog(op).Warn("recording the merge queue's freeze failed", "err", err)
		}
		return op
	}
	return next
}

// errQueueHeadTaken aborts the move to the head when another change took
// it first.
var errQueueHeadTaken = errors.New("the head of the merge queue is taken")

// queueTurn works HANDLE_QUEUED: when the change is first in line, the
// queue is not frozen and the head is free (or held by a change that is no
// longer at the head's steps), it takes the head and moves on to
// HANDLE_APPROVED in one transaction; otherwise it looks again later, at
// an interval that grows with its place in line (queueRecheck), since the
// head leaving wakes the next change at once (store.ReleaseQueueHead).
func (e handleWorker) queueTurn(ctx context.Context, op store.Operation) error {
	key := queueKey(op)
	q, err := e.st.GetQueue(ctx, e.st.DB(), key, int(rules.HandleQueued), queueLimit)
	if err != nil {
		return err
	}
	place := len(q.Waiting) + 1
	for i, w := range q.Waiting {
		if w.ID == op.ID {
			place = i + 1
			break
		}
	}
	readHead := e.queueHead(ctx, op, q)
	if place <= rules.QueueRefreshPlaces || q.Frozen() || strings.Contains(op.Detail, frozenMark) {
		// Near the head, or when the queue was frozen or unfrozen since
		// the change last said where it stands, its status comment says
		// so now; farther back it keeps its place from when it joined.
		head, hasHead, err := readHead()
		if err != nil {
			return err
		}
		if detail := queueDetail(op, q, aheadOf(op, q, place, head, hasHead)); detail != op.Detail {
			op = e.noteQueueWait(ctx, op, detail, q)
		}
	}
	if q.Frozen() {
		return snoozeFor(queueRecheck(place, e.pollFor(op)))
	}
	stale := ""
	if q.HeadOperationID != "" && q.HeadOperationID != op.ID {
		h, ok, err := readHead()
		switch {
		case err != nil:
			return err
		case !ok || !rules.HoldsQueueHead(rules.StepCode(h.Step)):
			stale = q.HeadOperationID // gone, or no longer at the head's steps
		default:
			return snoozeFor(queueRecheck(place, e.pollFor(op)))
		}
	}
	if place != 1 {
		return snoozeFor(queueRecheck(place, e.pollFor(op)))
	}
	payload := map[string]any{"queue": key.TargetBranch, "action": "queue_head"}
	if stale != "" {
		payload["took_over_from"] = stale
	}
	_, err = e.Transition(ctx, op, rules.HandleApproved, TransitionOpts{Source: "job:" + rules.KindHandle, Payload: payload,
		Guard: func(ctx context.Context, tx store.Tx, _ store.Operation, _ store.Binding) error {
			ok, err := e.st.ClaimQueueHead(ctx, tx, store.QueueHeadParams{Key: key, OperationID: op.ID, Stale: stale})
			if err == nil && !ok {
				err = errQueueHeadTaken
			}
			return err
		}})
	if errors.Is(err, errQueueHeadTaken) {
		return snoozeFor(e.pollFor(op).ShortInterval)
	}
	return err
}

// queueRecheck is how long a change at place waits before it looks at its
// queue again when nobody wakes it: about the time the changes ahead need
// (place times the short poll interval, at least one), at most the long
// poll interval. The head leaving wakes the next change at once; this is
// the fallback, so a waiting change costs a few looks, not one per second.
func queueRecheck(place int, p PollConfig) time.Duration {
	d := time.Duration(place) * p.ShortInterval
	return max(p.ShortInterval, min(d, p.LongInterval))
}

// releaseHeadGuard is the part of a move out of the head's steps that
// gives the head back and wakes the next change, in the move's own
// transaction (Engine.Transition).
func (e *Engine) releaseHeadGuard(ctx context.Context, tx store.Tx, op store.Operation) error {
	// The next change takes the head; the ones behind it near the head
	// look too, to say their new place (rules.QueueRefreshPlaces).
	next, released, err := e.st.ReleaseQueueHead(ctx, tx, queueKey(op), op.ID, int(rules.HandleQueued), rules.StepJobKinds(), rules.QueueRefreshPlaces)
	if released {
		e.opLog(op).Info("merge queue: gave the head back", "queue", queueKey(op).String(), "next", next)
	}
	return err
}

// Queue is a merge queue as people read it (GET /api/v1/queues/...).
type Queue struct {
	store.Queue
	// Head is the change at the head, when one is.
	Head *store.Operation
}

// Queue reads the merge queue of a project's target branch on the
// engine's platform, with up to 1,000 waiting changes in order.
func (e *Engine) Queue(ctx context.Context, projectID int64, branch string) (Queue, error) {
	q, err := e.st.GetQueue(ctx, e.st.DB(), store.QueueKey{Platform: e.platform, ProjectID: projectID, TargetBranch: branch},
		int(rules.HandleQueued), queueLimit)
	if err != nil {
		return Queue{}, err
	}
	out := Queue{Queue: q}
	if q.HeadOperationID != "" {
		if h, err := e.st.GetOperation(ctx, e.st.DB(), q.HeadOperationID); err == nil {
			out.Head = &h
		}
	}
	return out, nil
}

// Queues lists the engine's platform's merge queues.
func (e *Engine) Queues(ctx context.Context) ([]store.QueueSummary, error) {
	return e.st.ListQueues(ctx, e.st.DB(), e.platform, int(rules.HandleQueued))
}

// FreezeQueue freezes (frozen) or unfreezes the merge queue of a project's
// target branch, by actor for reason (issue 22 point 5). While it is
// frozen no change takes the head; the head already merging finishes.
// Unfreezing wakes the first waiting change.
func (e *Engine) FreezeQueue(ctx context.Context, projectID int64, branch string, frozen bool, actor, reason string) (store.Queue, error) {
	key := store.QueueKey{Platform: e.platform, ProjectID: projectID, TargetBranch: branch}
	if frozen {
		if err := e.queueApplies(ctx, projectID, branch); err != nil {
			return store.Queue{}, err
		}
	}
	q, err := e.st.FreezeQueue(ctx, key, frozen, actor, reason)
	if err != nil {
		return q, err
	}
	e.log.Info("merge queue frozen", "queue", key.String(), "frozen", frozen, "actor", actor, "reason", reason)
	// Every waiting change looks now: each status comment says the queue
	// is frozen, and who froze it (or no longer), and after an unfreeze
	// the first takes the head.
	e.wakeWaiting(ctx, key, queueLimit)
	return q, nil
}

// wakeWaiting makes the jobs of the first limit changes waiting in key's
// queue available now (store.WakeStep: no event); failures are logged
// (each change looks again by itself).
func (e *Engine) wakeWaiting(ctx context.Context, key store.QueueKey, limit int) {
	q, err := e.st.GetQueue(ctx, e.st.DB(), key, int(rules.HandleQueued), limit)
	if err != nil {
		e.log.Warn("reading a merge queue to wake its changes failed", "queue", key.String(), "err", err)
		return
	}
	for _, w := range q.Waiting {
		if _, err := e.st.WakeStep(ctx, e.st.DB(), w.ID, int(rules.HandleQueued), []string{rules.KindHandle}); err != nil {
			e.log.Warn("waking a change of a merge queue failed", "queue", key.String(), "operation_id", w.ID, "err", err)
		}
	}
}

// MoveToQueueFront makes a waiting change the next to take the head of
// its merge queue (an operator's move), and wakes it.
func (e *Engine) MoveToQueueFront(ctx context.Context, op store.Operation, actor, reason string) error {
	if rules.StepCode(op.Step) != rules.HandleQueued {
		return fmt.Errorf("%s is at %s, not waiting in a merge queue: %w", op.ID, rules.StepCode(op.Step), ErrNotQueued)
	}
	if err := e.st.MoveToQueueFront(ctx, op.ID, actor, reason); err != nil {
		return err
	}
	// The change's history says who moved it and why.
	if _, err := e.st.AppendEvent(ctx, op.ID, store.EventParams{Type: store.EventAttempt, Actor: actor, Source: "api",
		Payload: map[string]any{"action": "queue_front", "queue": op.TargetBranch, "reason": reason}}); err != nil {
		e.opLog(op).Warn("recording the move to the front of the merge queue failed", "err", err)
	}
	e.wakeWaiting(ctx, queueKey(op), 1)
	return nil
}

// NoQueueError is FreezeQueue's refusal to freeze a branch whose changes
// do not wait in a merge queue (they merge in parallel: freezing would
// hold nothing), or that does not exist: Reason says which, in words.
// Unknown reports a project or branch the platform does not have.
type NoQueueError struct {
	Reason  string
	Unknown bool
}

// Error implements error.
func (e *NoQueueError) Error() string { return e.Reason }

// queueApplies returns nil when the changes of projectID's branch wait in
// a merge queue (queue.mode and the merge method, or GitLab's merge
// trains), else a *NoQueueError: the project or the branch is unknown to
// the platform, or its changes merge in parallel. One read of the project
// and the branch each, shared for projectReadTTL.
func (e *Engine) queueApplies(ctx context.Context, projectID int64, branch string) error {
	p, err := e.project(ctx, strconv.FormatInt(projectID, 10))
	if errors.Is(err, platform.ErrNotFound) || errors.Is(err, platform.ErrForbidden) {
		return &NoQueueError{Unknown: true, Reason: fmt.Sprintf("project %d not found or not visible to the robot", projectID)}
	}
	if err != nil {
		return err
	}
	err = e.branchExists(ctx, p.ID, branch)
	if errors.Is(err, platform.ErrNotFound) {
		return &NoQueueError{Unknown: true, Reason: fmt.Sprintf("branch %q not found in project %s", branch, p.PathWithNamespace)}
	}
	if err != nil {
		return err
	}
	op := store.Operation{Platform: e.platform, Project: p.PathWithNamespace, ProjectID: p.ID, TargetBranch: branch}
	needs, err := e.needsQueue(ctx, op)
	if err != nil || needs {
		return err
	}
	trains, err := e.mergeTrains(ctx, op)
	if err != nil || trains {
		return err
	}
	return &NoQueueError{Reason: fmt.Sprintf("the changes of %s in %s merge in parallel, without a merge queue (queue.mode %s, merge method %s): "+
		"freezing would hold nothing; set queue.mode on for the project to queue them", branch, p.PathWithNamespace,
		e.queueFor(op).Mode, p.MergeMethod)}
}

// ErrNotQueued is returned (wrapped) when a change that is not waiting in
// a merge queue is moved to its front.
var ErrNotQueued = errors.New("change is not waiting in a merge queue")

// mergeTrains reports whether op's target branch merges through the
// platform's own queue: GitLab's merge trains (platform.Project.MergeTrains,
// a project setting) or a GitHub branch that requires a merge queue
// (branchMergeQueues, per branch). Either answer is read at most once per
// projectReadTTL. Then that queue is the queue, and the change is added
// to it instead of merged (issue 22 point 4). On GitLab queue.mode off
// merges directly; a GitHub branch that requires a merge queue takes no
// other merge (the REST merge answers 405), so queue.mode does not apply.
func (e *Engine) mergeTrains(ctx context.Context, op store.Operation) (bool, error) {
	if rules.WordsOf(op.Platform).OnGitHub() {
		mq, ok := e.gl.(branchMergeQueues)
		if !ok {
			return false, nil
		}
		q, err := e.mergeQueue(ctx, mq, op.ProjectID, op.TargetBranch)
		if err != nil {
			return false, fmt.Errorf("reading whether %s of %s requires a merge queue: %w", op.TargetBranch, op.Project, err)
		}
		return q, nil
	}
	if e.queueFor(op).Mode == rules.QueueOff {
		return false, nil
	}
	p, err := e.project(ctx, op.Project)
	if err != nil {
		return false, fmt.Errorf("reading whether %s has merge trains: %w", op.Project, err)
	}
	return p.MergeTrains, nil
}

// branchMergeQueues is how the GitHub adapter says whether a branch
// requires a merge queue (platform/github.Client.MergeQueue, GraphQL
// repository.mergeQueue). GitLab's adapter has none: its merge trains are
// a project setting.
type branchMergeQueues interface {
	MergeQueue(ctx context.Context, projectID int64, branch string) (bool, error)
}

// joinTrain adds the approved merge request, read open at head mr.SHA, to
// the merge train of its target branch: one call per (operation, head
// sha), claimed in the commit gate as a merge is (a replica that loses the
// claim reads again later), then HANDLE_IN_TRAIN. A head that moved
// meanwhile (409) waits for the new head's pipeline; a refusal (400: not
// mergeable now, 403: no merge trains after all) ends in
// HANDLE_NOT_MERGEABLE with GitLab's words.
func (e handleWorker) joinTrain(ctx context.Context, op store.Operation, mr platform.MergeRequest) error {
	lease, err := e.claimMerge(ctx, op, mr.SHA)
	if err != nil {
		return err
	}
	err = e.gl.AddToMergeTrain(ctx, op.ProjectID, op.MRIID, mr.SHA, mr.Squash)
	w := rules.WordsOf(op.Platform)
	switch {
	case err == nil:
		_, err = e.Transition(ctx, op, rules.HandleInTrain, TransitionOpts{Source: "job:" + rules.KindHandle,
			Payload: map[string]any{"head_sha": mr.SHA, "merge_train": op.TargetBranch},
			Update:  func(o *store.Operation) { o.Detail = "on the " + w.Train + " of " + op.TargetBranch }})
		return err
	case errors.Is(err, platform.ErrHeadMoved):
		e.releaseMerge(ctx, op, lease, w.Platform+" answered 409: the head moved")
		return e.shaMismatch(ctx, op)
	case platform.IsRefused(err):
		e.releaseMerge(ctx, op, lease, fmt.Sprintf("%s answered %d", w.Platform, platform.StatusOf(err)))
		return failTo(rules.HandleNotMergeable, "%s refused to add %s to the %s of %s: %s", w.Platform, w.Ref(op.MRIID), w.Train, op.TargetBranch, failureDetail(w, err))
	}
	return err
}

// pollTrain works HANDLE_IN_TRAIN: the merge request merged (finish as
// merged), closed, retargeted or pushed to are settled as everywhere
// (readOpenMR); still open, its car is read: gone from the train means
// GitLab removed it (its train pipeline failed, or a person took it off):
// HANDLE_FAILED naming the pipeline; otherwise look again at the polling
// schedule (the merge's webhook usually comes first).
func (e handleWorker) pollTrain(ctx context.Context, op store.Operation) error {
	_, done, err := e.readOpenMR(ctx, op, false)
	if done {
		return err
	}
	car, err := e.gl.MergeTrainCar(ctx, op.ProjectID, op.MRIID)
	w := rules.WordsOf(op.Platform)
	switch {
	case errors.Is(err, platform.ErrNotFound):
		return failTo(rules.HandleFailed, "%s removed %s from the %s of %s (its %s did not succeed, or a person took it off): fix it and comment /retry",
			w.Platform, w.Ref(op.MRIID), w.Train, op.TargetBranch, w.TrainPipeline)
	case err != nil:
		return err
	}
	p := e.pollFor(op)
	d, _ := stepped(p, e.now(), op.StepStartedAt, 24*time.Hour)
	if car.Status == "merged" {
		d = p.ShortInterval // the merge request shows merged shortly
	}
	return snoozeFor(max(d, time.Second))
}

// branchPipelines is the pipeline of a branch that a deferred change's
// head needs (GitLab's POST /projects/:id/pipeline, which runs whatever
// the commit message says; platform/gitlab.Client.CreateBranchPipeline).
// The GitHub adapter has none, so nothing is deferred there.
type branchPipelines interface {
	CreateBranchPipeline(ctx context.Context, projectID int64, ref string) (platform.Pipeline, error)
}

// defersCI reports whether op's first pipeline waits until op reaches the
// head of its merge queue (queue.defer_ci, rules.DefersCI, which also
// says whether op queues at all, rules.NeedsQueue): its commit then
// carries rules.SkipCIMarker and the head runs the pipeline
// (runDeferredPipeline). One read of the project, at most once per
// projectReadTTL, shared by every change of the project.
func (e *Engine) defersCI(ctx context.Context, op store.Operation) (bool, error) {
	cfg := e.queueFor(op)
	if _, ok := e.gl.(branchPipelines); !ok || cfg.DeferCI == rules.DeferCIOff {
		return false, nil
	}
	p, err := e.project(ctx, op.Project)
	if err != nil {
		return false, fmt.Errorf("reading the merge method of %s: %w", op.Project, err)
	}
	queued := rules.NeedsQueue(cfg.Mode, op.Platform, p.MergeMethod)
	return rules.DefersCI(cfg.DeferCI, op.Platform, p.MergeMethod, queued, p.MergeTrains), nil
}

// pipelineDeferred reports whether a change of a project that defers
// (defersCI: defers) still needs, at the head of its merge queue, the
// pipeline it deferred: mr's head has no pipeline that ran, none yet or
// only the skipped one its commit's [skip ci] made (rules.SkipCIMarker; a
// rebase keeps the message, so a rebased head is skipped too). The
// platform's state decides, not a memory of ours: a head a person pushed
// has its own pipeline, which the change waits for as before.
func pipelineDeferred(defers bool, mr platform.MergeRequest) bool {
	hp := headPipeline(mr)
	return defers && (hp == nil || hp.Status == platform.PipelineSkipped)
}

// runDeferredPipeline starts, for op at the head of its merge queue with
// an up-to-date head, the pipeline its commit skipped (issue 22 point 2:
// a queued change costs one pipeline) and moves it to wait for it in
// HANDLE_AWAIT_PIPELINE (startHeadPipeline). It is a pipeline of the
// source branch created through the API: a merge request pipeline would be
// skipped again, since GitLab honours the commit's [skip ci] for those
// (rules.SkipCIMarker).
func (e *Engine) runDeferredPipeline(ctx context.Context, op store.Operation, head, source string) error {
	bp, ok := e.gl.(branchPipelines)
	if !ok {
		return fmt.Errorf("running the deferred pipeline of %s: the platform adapter has no branch pipelines", op.ID)
	}
	return e.startHeadPipeline(ctx, op, head, source, "deferred_pipeline", func() (platform.Pipeline, error) {
		return bp.CreateBranchPipeline(ctx, op.ProjectID, op.SourceBranch)
	})
}

// rerunHeadPipeline runs the pipeline of op's head again: a merge request
// pipeline, and where GitLab answers that one skipped (the head's commit
// says [skip ci]: a deferred change, also one whose project turned
// queue.defer_ci off since) a pipeline of its branch, which runs whatever
// the message says (rules.SkipCIMarker). The platform's answer decides,
// not the setting, so a change committed under either keeps a way out.
func (e *Engine) rerunHeadPipeline(ctx context.Context, op store.Operation) (platform.Pipeline, error) {
	pl, err := e.gl.CreateMergeRequestPipeline(ctx, op.ProjectID, op.MRIID)
	if err != nil || pl.Status != platform.PipelineSkipped {
		return pl, err
	}
	if bp, ok := e.gl.(branchPipelines); ok {
		return bp.CreateBranchPipeline(ctx, op.ProjectID, op.SourceBranch)
	}
	return pl, nil
}

// startHeadPipeline starts a pipeline of op's head with start and moves op
// to wait for it in HANDLE_AWAIT_PIPELINE, the pipeline's id recorded so
// that only its result counts (older pipelines of the head, skipped or
// failed, have lower ids); action names it in the event. A refusal (400:
// the CI configuration's rules leave every job out for pipeline source
// "api") fails the change with what to do; a transient error retries the
// job.
func (e *Engine) startHeadPipeline(ctx context.Context, op store.Operation, head, source, action string, start func() (platform.Pipeline, error)) error {
	pl, err := start()
	if platform.IsRefused(err) {
		return failTo(rules.HandleFailed, "%s refused to run a %s for %s on branch %s: %s; where the CI configuration keeps pipelines of source \"api\" out, let it run them, or set queue.defer_ci off for %s, /cancel and submit the change again (its commit skips CI)",
			rules.WordsOf(op.Platform).Platform, rules.WordsOf(op.Platform).Pipeline, rules.WordsOf(op.Platform).Ref(op.MRIID), op.SourceBranch, failureDetail(rules.WordsOf(op.Platform), err), op.Project)
	}
	if err != nil {
		return err
	}
	e.opLog(op).Info("merge queue: running the head's pipeline", "action", action, "pipeline_id", pl.ID, "head_sha", head)
	_, err = e.Transition(ctx, op, rules.HandleAwaitPipeline, TransitionOpts{Source: source,
		Payload: map[string]any{"head_sha": head, "pipeline_id": pl.ID, action: true},
		Update: func(o *store.Operation) {
			o.HeadSHA, o.PipelineID, o.PipelineURL, o.Detail = head, pl.ID, pl.WebURL, ""
		}})
	return err
}
