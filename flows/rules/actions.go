package rules

import "errors"

// ActionParams identify who asked for an action and from where (recorded
// on the event).
type ActionParams struct {
	Actor  string // GitLab username
	Source string // "command:<note id>"
	// Command is the command name, for the event payload.
	Command string
	// Reason is why the person acts, in their words ("" for none): the
	// event's payload "reason", and, for a cancel, the change's detail
	// ("cancelled by olivia: wrong file").
	Reason string
}

// ErrNotApplicable is returned (wrapped in *NotApplicableError) when a
// command does not apply to the change in its current step.
var ErrNotApplicable = errors.New("not applicable in this state")

// NotApplicableError explains why a command does nothing now.
type NotApplicableError struct{ Reason string }

// Error implements error.
func (e *NotApplicableError) Error() string { return e.Reason }

// Is makes errors.Is(err, ErrNotApplicable) hold.
func (e *NotApplicableError) Is(t error) bool { return t == ErrNotApplicable }

// Action names an action on a change that people take from an MR comment
// or the REST API. The names are persisted (event payloads) and equal the
// command names: never rename one.
type Action string

// The actions of Act.
const (
	ActionRetry  Action = "retry"
	ActionResume Action = "resume"
	ActionCancel Action = "cancel"
)
