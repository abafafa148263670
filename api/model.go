package api

import (
	"encoding/json"
	"errors"
	"time"
)

// Change is a change as the API reads it: the operation and the binding
// status it holds (the store's operation, translated by the backend).
type Change struct {
	ID string
	// Platform is rules.PlatformGitLab ("" too) or rules.PlatformGitHub.
	Platform                      string
	SubjectID, TargetKey, Project string
	Title, RequestedBy            string
	Status                        string
	Step                          int
	Detail                        string
	ProjectID, MRIID              int64
	MRWebURL                      string
	ApprovalFirst                 bool
	StepStartedAt                 time.Time
	CreatedAt, UpdatedAt          time.Time
	// SubmittedBy is the id of the API token that submitted the change
	// (tokenID; its submitted event's submitted_by), "" when none did.
	SubmittedBy string
	// RolloutID is the rollout the change was submitted in ("" for none).
	RolloutID string
	// Adopted marks a change carrying a developer's merge request.
	Adopted bool
	// Files are the submitted files (read by one change, not by a list).
	Files []File
}

// Event is one event of a change's history, as the API answers it
// (openapi.json Event; the store's event, field for field).
type Event struct {
	OperationID   string          `json:"operation_id"`
	Seq           int64           `json:"seq"`
	Type          string          `json:"type"`
	FromStep      int             `json:"from_step"`
	ToStep        int             `json:"to_step"`
	FromStatus    string          `json:"from_status"`
	ToStatus      string          `json:"to_status"`
	Actor         string          `json:"actor"`
	Source        string          `json:"source"`
	Payload       json.RawMessage `json:"payload"`
	SchemaVersion int             `json:"schema_version"`
	OccurredAt    time.Time       `json:"occurred_at"`
	PrevHash      string          `json:"prev_hash"`
	Hash          string          `json:"hash"`
	// SourceWords is Source in words for the pages' timeline ("the
	// approval system's callback"); not answered.
	SourceWords string `json:"-"`
	// What says what the event did, as the status comment's timeline
	// does ("approved by carol"); for the pages, not answered.
	What string `json:"-"`
}

// History is a change and its events read in one snapshot: Stored as
// stored (the form their hash chain covers), Current upcast to the events'
// current schema version.
type History struct {
	Change          Change
	Stored, Current []Event
}

// File is one file of a submission.
type File struct {
	Path, Content, Action string
}

// Submission is a change as submitted through POST /api/v1/changes, with
// who sent it.
type Submission struct {
	SubjectID, TargetKey, Project, TargetBranch string
	Title, Description, RequestedBy             string
	Files                                       []File
	// IdempotencyKey is the request's Idempotency-Key ("" for none).
	IdempotencyKey string
	// SubmittedBy is the submitting token's id (tokenID), never the token.
	SubmittedBy string
	// RolloutID is the request's rollout_id ("" for none).
	RolloutID string
}

// FieldError is one field problem of a submission (openapi.json
// FieldError).
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ListParams are the filters of one page of changes (ParseListQuery);
// zero values do not filter.
type ListParams struct {
	Statuses               []string
	Steps                  []int
	Project, SubjectID     string
	TargetKey, RequestedBy string
	// RolloutID keeps the changes of one rollout.
	RolloutID                   string
	UpdatedAfter, UpdatedBefore time.Time
	// StuckAt, when set, keeps only the changes stuck at that moment: in a
	// step past its deadline (the step table's, from the settings).
	StuckAt time.Time
	// Before is the keyset cursor: only changes whose id sorts before it.
	Before string
	// Limit bounds the changes.
	Limit int
}

// Replayed is a change's state rebuilt from its events at a moment: the
// last event then (Seq 0: none, the change did not exist yet), and the
// step and status it left.
type Replayed struct {
	Seq    int64
	Step   int
	Status string
}

// ErrNotFound is what the Engine and the Store answer for a change that
// does not exist.
var ErrNotFound = errors.New("no such change")

// ErrOverloaded is Engine.Submit's refusal by admission control (the
// setting admission.max_active): nothing was created, retry later.
var ErrOverloaded = errors.New("too many active changes")

// ValidationError lists every field problem of a submission (400).
type ValidationError struct{ Fields []FieldError }

// Error implements error.
func (e *ValidationError) Error() string {
	msg := "invalid change"
	for i, f := range e.Fields {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		msg += sep + f.Field + " " + f.Message
	}
	return msg
}

// CheckError is a submission the platform's checks refuse: the project,
// the branch or a file does not fit (422); nothing was created.
type CheckError struct{ Fields []FieldError }

// Error implements error.
func (e *CheckError) Error() string { return (&ValidationError{Fields: e.Fields}).Error() }

// UnavailableError is a submission whose checks the platform could not
// answer (503); RetryAfter is the platform's wait, zero when it named none.
type UnavailableError struct {
	RetryAfter time.Duration
	Err        error
}

// Error implements error.
func (e *UnavailableError) Error() string { return e.Err.Error() }

// Unwrap returns the platform's error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// IdempotencyConflictError is an Idempotency-Key reused with another body
// (422): OperationID is the change the key was first used for, Fields the
// fields that differ, Message says so.
type IdempotencyConflictError struct {
	OperationID string
	Fields      []string
	Message     string
}

// Error implements error.
func (e *IdempotencyConflictError) Error() string { return e.Message }

// BindingHeldError is a submission for a binding another change holds
// (409): that change, its status, whether it failed (then it must be
// retried or cancelled first), and the reason in words.
type BindingHeldError struct {
	OperationID, Status string
	Failed              bool
	Reason              string
}

// Error implements error.
func (e *BindingHeldError) Error() string { return "binding held: " + e.Reason }

// RefusedError is a settings write the settings refuse (400: an unknown
// key, a value of the wrong type or under its minimum, a global-only key
// for a project, a rule between two settings broken); nothing was stored.
// Its message is the settings' own.
type RefusedError struct{ Err error }

// Error implements error.
func (e *RefusedError) Error() string { return e.Err.Error() }

// Unwrap returns the settings' error.
func (e *RefusedError) Unwrap() error { return e.Err }

// Queue is a merge queue of a project's target branch as the API reads it
// (issue 22): the change at its head, whether an operator froze it, and
// the changes waiting in it, first in line first (the backend translates
// the engine's).
type Queue struct {
	ProjectID int64
	// Project is the project's path as the changes of the queue store it,
	// "" when none of them is known.
	Project      string
	TargetBranch string
	// Head is the change allowed to be rebased, tested and merged now;
	// nil when none.
	Head *QueueHead
	// FrozenAt is when an operator froze the queue (zero: it is not
	// frozen), FrozenBy who (an API token's id, a username), FrozenReason
	// why.
	FrozenAt               time.Time
	FrozenBy, FrozenReason string
	// WaitingCount is how many changes wait (in a listing, where Waiting
	// is nil); Waiting are the changes waiting, in order (one queue).
	WaitingCount int
	Waiting      []QueuedChange
}

// Frozen reports whether an operator froze the queue.
func (q Queue) Frozen() bool { return !q.FrozenAt.IsZero() }

// QueueHead is the change at the head of a merge queue: MRIID and MRWebURL
// are zero when the change could not be read, Since is when it took the
// head.
type QueueHead struct {
	OperationID string
	MRIID       int64
	MRWebURL    string
	Since       time.Time
}

// QueuedChange is a change waiting in a merge queue: ReadyAt is when it
// joined; FrontAt and FrontBy say when and by whom an operator moved it to
// the front (zero and "" when nobody did).
type QueuedChange struct {
	OperationID                           string
	MRIID                                 int64
	MRWebURL, Title, SubjectID, TargetKey string
	ReadyAt, FrontAt                      time.Time
	FrontBy                               string
}

// NoQueueError is a freeze of a branch whose changes do not wait in a
// merge queue (409: they merge in parallel, so a freeze would hold
// nothing) or that the platform does not have (Unknown: 404). Reason says
// which, in words.
type NoQueueError struct {
	Reason  string
	Unknown bool
	Err     error
}

// Error implements error.
func (e *NoQueueError) Error() string { return e.Reason }

// Unwrap returns the engine's error.
func (e *NoQueueError) Unwrap() error { return e.Err }

// NotQueuedError is a move to the front of a merge queue of a change that
// does not wait in one (409): OperationID is the change, Step its step
// ("" when unknown).
type NotQueuedError struct {
	OperationID, Step string
	Err               error
}

// Error implements error.
func (e *NotQueuedError) Error() string {
	msg := "change " + e.OperationID + " is not waiting in a merge queue"
	if e.Step != "" {
		msg += " (it is at " + e.Step + ")"
	}
	return msg + "; only a change at HANDLE_QUEUED can be moved to the front of its queue"
}

// Unwrap returns the engine's error.
func (e *NotQueuedError) Unwrap() error { return e.Err }

// Overview is what the operators' overview page counts (Store.ReadOverview).
type Overview struct {
	// ByStatus is every status's count of changes, in rules.Statuses()
	// order.
	ByStatus []StatusCount
	// ByProject counts the active changes (not in a final status) per
	// project and status, by project then status.
	ByProject []ProjectCount
	// LastDeliveryAt is when the newest stored webhook delivery arrived
	// (zero: none yet).
	LastDeliveryAt time.Time
	// RetryingJobs wait to retry after an error; DiscardedJobs gave up in
	// the last hour.
	RetryingJobs, DiscardedJobs int
	// BudgetLeft is the call budget's calls left per account after this
	// replica's last take; nil without a budget.
	BudgetLeft map[string]float64
}

// StatusCount is how many changes are in a status.
type StatusCount struct {
	Status string
	Count  int
}

// ProjectCount is how many changes of a project are in a status.
type ProjectCount struct {
	Project, Status string
	Count           int
}
