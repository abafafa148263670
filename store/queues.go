package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// QueueKey names one merge queue: a target branch of one project on one
// platform (issue 22 point 2; table merge_queues, migration 0019).
type QueueKey struct {
	Platform     string
	ProjectID    int64
	TargetBranch string
}

// String is "gitlab:101:main", for logs and errors.
func (k QueueKey) String() string {
	return fmt.Sprintf("%s:%d:%s", PlatformOr(k.Platform), k.ProjectID, k.TargetBranch)
}

// Queue is a merge queue as stored: who is at its head, whether it is
// frozen, and (QueueParams.WaitingStep) the changes waiting in order.
type Queue struct {
	Key QueueKey
	// HeadOperationID is the change allowed to be rebased, tested and
	// merged now; "" when none. HeadSince is when it took the head.
	HeadOperationID string
	HeadSince       time.Time
	// FrozenAt is when an operator froze the branch (zero: not frozen),
	// FrozenBy who (an actor: "token:<id>", "@user"), FrozenReason why.
	FrozenAt     time.Time
	FrozenBy     string
	FrozenReason string
	UpdatedAt    time.Time
	// TurnAvg is how long a change held the head, on average over the
	// turns so far (each new turn weighs 1/4); 0 before any turn.
	TurnAvg time.Duration
	// Waiting are the changes at the waiting step, first in line first:
	// those an operator moved to the front (earliest move first), then
	// by the time each became ready (its step's start), then by id.
	Waiting []QueuedOperation
}

// Frozen reports whether an operator froze the queue's branch.
func (q Queue) Frozen() bool { return !q.FrozenAt.IsZero() }

// QueuedOperation is a change waiting in a merge queue.
type QueuedOperation struct {
	ID        string
	MRIID     int64
	MRWebURL  string
	Title     string
	SubjectID string
	TargetKey string
	// ReadyAt is when it joined the queue (its step's start).
	ReadyAt time.Time
	// FrontAt and FrontBy say when and by whom an operator moved it to
	// the front; zero and "" when nobody did.
	FrontAt time.Time
	FrontBy string
}

// QueueSummary is one merge queue in a listing: its row and how many
// changes wait in it.
type QueueSummary struct {
	Queue
	WaitingCount int
}

// QueueHeadParams take or give back the head of a queue.
type QueueHeadParams struct {
	Key         QueueKey
	OperationID string
	// Stale, when not "", is a holder the caller found no longer at the
	// head's steps (it left without giving the head back): the claim
	// replaces it too.
	Stale string
}

// QueueQueries are the queries of the merge queues (issue 22).
type QueueQueries interface {
	// QueueEnsure creates the queue's row unless it exists.
	QueueEnsure(ctx context.Context, key QueueKey, now time.Time) error
	// QueueClaimHead sets the head to p.OperationID when it is "", is
	// p.OperationID already, or is p.Stale (when set), and reports
	// whether it did.
	QueueClaimHead(ctx context.Context, p QueueHeadParams, now time.Time) (bool, error)
	// QueueReleaseHead clears the head when it is operationID and reports
	// whether it did; turn (how long it held the head; 0: unknown) goes
	// into the queue's average turn (TurnAvg).
	QueueReleaseHead(ctx context.Context, key QueueKey, operationID string, now time.Time, turn time.Duration) (bool, error)
	// QueueGet reads the queue's row; ErrNotFound.
	QueueGet(ctx context.Context, key QueueKey) (Queue, error)
	// QueueWaiting lists up to limit operations of the queue at step, in
	// the queue's order (Queue.Waiting).
	QueueWaiting(ctx context.Context, key QueueKey, step int, limit int) ([]QueuedOperation, error)
	// QueueList lists the queues of platform ("" every platform) with the
	// number of their operations at step, by project and branch.
	QueueList(ctx context.Context, platform string, step int) ([]QueueSummary, error)
	// QueueSetFrozen writes the freeze of the queue's row (a zero at
	// unfreezes it, clearing by and reason).
	QueueSetFrozen(ctx context.Context, key QueueKey, by, reason string, at, now time.Time) error
	// QueueFrontSet marks operationID as moved to the front by by.
	QueueFrontSet(ctx context.Context, operationID, by, reason string, at time.Time) error
	// QueueFrontDelete removes operationID's front mark.
	QueueFrontDelete(ctx context.Context, operationID string) error
}

// Queues are the merge queues of target branches (issue 22): the head,
// the order of the waiting changes and the freeze, shared by all replicas.
type Queues interface {
	ClaimQueueHead(ctx context.Context, db DBTX, p QueueHeadParams) (bool, error)
	ReleaseQueueHead(ctx context.Context, db DBTX, key QueueKey, operationID string, waitingStep int, kinds []string, wake int) (next string, released bool, err error)
	GetQueue(ctx context.Context, db DBTX, key QueueKey, waitingStep, limit int) (Queue, error)
	ListQueues(ctx context.Context, db DBTX, platform string, waitingStep int) ([]QueueSummary, error)
	FreezeQueue(ctx context.Context, key QueueKey, frozen bool, by, reason string) (Queue, error)
	MoveToQueueFront(ctx context.Context, operationID, by, reason string) error
}

// ClaimQueueHead makes p.OperationID the head of its queue unless another
// change holds it (p.Stale aside), creating the queue's row when needed,
// and removes its front mark (it is no longer waiting). It reports whether
// the change holds the head now. Run it in the transaction that moves the
// change to the head's first step (a TransitionParams.Guard), so the head
// and the step commit together: exactly one change per branch is at the
// head across replicas (issue 22 point 6). On PostgreSQL a concurrent
// claim of the same queue waits on the row's lock and then finds it taken.
func (s *DriverStore) ClaimQueueHead(ctx context.Context, db DBTX, p QueueHeadParams) (bool, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return false, err
	}
	now := s.Now()
	if err := x.QueueEnsure(ctx, p.Key, now); err != nil {
		return false, fmt.Errorf("creating the queue of %s: %w", p.Key, err)
	}
	ok, err := x.QueueClaimHead(ctx, p, now)
	if err != nil {
		return false, fmt.Errorf("claiming the head of the queue of %s for %s: %w", p.Key, p.OperationID, err)
	}
	if ok {
		if err := x.QueueFrontDelete(ctx, p.OperationID); err != nil {
			return false, fmt.Errorf("clearing the front mark of %s: %w", p.OperationID, err)
		}
	}
	return ok, nil
}

// ReleaseQueueHead gives back the head of key's queue when operationID
// holds it, and then makes the jobs of the first wake changes waiting at
// waitingStep (kinds: the step's job kinds; at least the first) due now,
// so the next change moves up at once rather than at its next look and
// the ones behind it can say their new place. It returns the first
// waiting change's id ("" when none waits) and whether operationID held
// the head. Run it in the transaction that moves the head away (merged,
// failed, cancelled, closed, parked): the head and the step commit
// together.
func (s *DriverStore) ReleaseQueueHead(ctx context.Context, db DBTX, key QueueKey, operationID string, waitingStep int, kinds []string, wake int) (string, bool, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return "", false, err
	}
	now := s.Now()
	var turn time.Duration
	if q, err := x.QueueGet(ctx, key); err == nil && q.HeadOperationID == operationID && !q.HeadSince.IsZero() {
		turn = now.Sub(q.HeadSince)
	}
	released, err := x.QueueReleaseHead(ctx, key, operationID, now, turn)
	if err != nil || !released {
		if err != nil {
			err = fmt.Errorf("giving back the head of the queue of %s: %w", key, err)
		}
		return "", false, err
	}
	next, err := x.QueueWaiting(ctx, key, waitingStep, max(wake, 1))
	if err != nil {
		return "", true, fmt.Errorf("reading the queue of %s: %w", key, err)
	}
	if len(next) == 0 {
		return "", true, nil
	}
	for _, w := range next {
		if _, err := x.JobWakeLiveOfStep(ctx, w.ID, waitingStep, kinds, now); err != nil {
			return "", true, fmt.Errorf("waking %s, waiting in the queue of %s: %w", w.ID, key, err)
		}
	}
	return next[0].ID, true, nil
}

// GetQueue reads key's queue with up to limit waiting changes (those at
// waitingStep), in order. A queue without a row (nobody joined or froze it
// yet) is returned empty, not ErrNotFound.
func (s *DriverStore) GetQueue(ctx context.Context, db DBTX, key QueueKey, waitingStep, limit int) (Queue, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return Queue{}, err
	}
	q, err := x.QueueGet(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		q = Queue{Key: key}
	case err != nil:
		return Queue{}, fmt.Errorf("reading the queue of %s: %w", key, err)
	}
	if q.Waiting, err = x.QueueWaiting(ctx, key, waitingStep, limit); err != nil {
		return Queue{}, fmt.Errorf("reading the queue of %s: %w", key, err)
	}
	return q, nil
}

// ListQueues lists the merge queues of platform ("" all) by project and
// branch, each with how many changes wait at waitingStep.
func (s *DriverStore) ListQueues(ctx context.Context, db DBTX, platform string, waitingStep int) ([]QueueSummary, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	out, err := x.QueueList(ctx, platform, waitingStep)
	if err != nil {
		return nil, fmt.Errorf("listing the merge queues: %w", err)
	}
	return out, nil
}

// FreezeQueue freezes (frozen) or unfreezes key's queue, recording who and
// why, and returns its row. A frozen queue's head finishes what it started
// only if it is already merging; no change takes the head while it is
// frozen (the flows' rule). Freezing a frozen queue keeps the first freeze.
func (s *DriverStore) FreezeQueue(ctx context.Context, key QueueKey, frozen bool, by, reason string) (Queue, error) {
	var out Queue
	err := s.inTx(ctx, func(_ Tx, x Executor) error {
		now := s.Now()
		if err := x.QueueEnsure(ctx, key, now); err != nil {
			return err
		}
		q, err := x.QueueGet(ctx, key)
		if err != nil {
			return err
		}
		if frozen && q.Frozen() {
			out = q
			return nil
		}
		at := time.Time{}
		if frozen {
			at = now
		} else {
			by, reason = "", ""
		}
		if err := x.QueueSetFrozen(ctx, key, CleanText(by), CleanText(reason), at, now); err != nil {
			return err
		}
		out, err = x.QueueGet(ctx, key)
		return err
	})
	if err != nil {
		return Queue{}, fmt.Errorf("freezing the queue of %s: %w", key, err)
	}
	return out, nil
}

// MoveToQueueFront marks operationID to be taken before every change that
// waits in its queue and was not moved earlier (an operator's move; the
// head keeps the head).
func (s *DriverStore) MoveToQueueFront(ctx context.Context, operationID, by, reason string) error {
	x, err := s.d.Executor(s.d.DB())
	if err != nil {
		return err
	}
	if err := x.QueueFrontSet(ctx, operationID, CleanText(by), CleanText(reason), s.Now()); err != nil {
		return fmt.Errorf("moving %s to the front of its queue: %w", operationID, err)
	}
	return nil
}
