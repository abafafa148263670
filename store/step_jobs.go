package store

import (
	"github.com/riverqueue/river"
)

// ResumeStepParams are the arguments of ResumeStep.
type ResumeStepParams struct {
	OperationID string
	// Step is the step the caller read; the operation must still be at it.
	Step int
	// Kinds are the step job kinds: a live job of one of them whose args
	// name this operation and step is the step's job, whatever its version.
	Kinds []string
	// Event is recorded on the operation (from/to are its current step).
	Event EventParams
	// Jobs are enqueued only when the step has no live job.
	Jobs []river.InsertManyParams
}
