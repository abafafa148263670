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
	// OperationID is the operation that holds the binding.
	OperationID string
	// Status is its binding status.
	Status string
}

// Error implements error.
func (e *ActiveChangeError) Error() string { return "binding held: " + e.Reason() }

// Is makes errors.Is(err, ErrActiveChange) hold.
func (e *ActiveChangeError) Is(target error) bool { return target == ErrActiveChange }

// Failed reports whether the holding operation failed (IsFailed): it keeps
// the binding until it is retried or cancelled.
func (e *ActiveChangeError) Failed() bool { return IsFailed(e.Status) }

// Reason says, for people (the API's 409), why the binding is not free and
// what frees it, naming the holding operation and its status.
func (e *ActiveChangeError) Reason() string {
	if e.Failed() {
		return fmt.Sprintf("the binding's change %s failed (%s): retry or cancel it first", e.OperationID, e.Status)
	}
	return fmt.Sprintf("the binding has a change in progress: %s (%s)", e.OperationID, e.Status)
}
