package store

import (
	"fmt"

	"github.com/riverqueue/river"
)

// CreateParams are the arguments of CreateOperation.
type CreateParams struct {
	// Operation to insert; ID, Step, Status and the request fields must be set.
	Operation Operation
	// Event is the first event ("submitted").
	Event EventParams
	// Jobs are enqueued in the same transaction.
	Jobs []river.InsertManyParams
}

// ActiveChangeError is returned (wrapped) by CreateOperation when the binding
// is held by another operation, in progress or failed;
// errors.Is(err, ErrActiveChange) holds.
type ActiveChangeError struct {
	// SubjectID and TargetKey name the binding.
	SubjectID, TargetKey string
	// OperationID is the operation that holds the binding.
	OperationID string
	// Status is its binding status.
	Status string
	// MRIID is its merge (pull) request's number, 0 when it has none yet
	// or could not be read; Platform is its platform.
	MRIID    int64
	Platform string
}

// Error implements error.
func (e *ActiveChangeError) Error() string {
	return fmt.Sprintf("binding %s / %s held by %s (%s)", e.SubjectID, e.TargetKey, e.OperationID, e.Status)
}

// Is makes errors.Is(err, ErrActiveChange) hold.
func (e *ActiveChangeError) Is(target error) bool { return target == ErrActiveChange }

// Failed reports whether the holding operation failed (IsFailed): it keeps
// the binding until it is retried or cancelled.
func (e *ActiveChangeError) Failed() bool { return IsFailed(e.Status) }
