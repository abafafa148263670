package store

import (
	"context"

	"github.com/riverqueue/river"
)

// TransitionParams are the arguments of ApplyTransition.
type TransitionParams struct {
	OperationID string
	// ExpectStep is the step the caller read and checked the move from; the
	// write happens only if the row is still at it (else ErrStepMismatch).
	ExpectStep int
	// ExpectVersion is the version the caller read; 0 skips the version
	// check (idempotent flips that only depend on ExpectStep). A mismatch is
	// ErrVersionConflict.
	ExpectVersion int64
	ToStep        int
	ToStatus      string
	// Update sets fields of the operation row read under lock (MR iid, head
	// sha, detail...). It must not change ID, Step, Status or Version.
	Update func(op *Operation)
	// Guard runs after both rows are locked and checked; an error aborts the
	// transaction and is returned as is (for example a dedupe insert that
	// reports ErrDuplicate).
	Guard func(ctx context.Context, tx Tx, op Operation, b Binding) error
	Event EventParams
	Jobs  []river.InsertManyParams
	// EventJobsFunc, when set, returns more jobs to enqueue in the same
	// transaction, made from the operation as written and the event
	// appended (its sequence number and time): the notifications of a
	// move (issue 25 point 3).
	EventJobsFunc func(op Operation, ev Event) []river.InsertManyParams
	// Rollout, when set, tells the state of the rollout of a change that
	// has a RolloutID, in the same transaction (RolloutNotice).
	Rollout *RolloutNotice
	// KeepStepClock keeps step_started_at (a same-step bookkeeping write).
	KeepStepClock bool
}
