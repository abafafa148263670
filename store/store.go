// Package store owns changebot's persistent state as a contract: the domain
// types (operations, bindings, the hash-chained change events, webhook
// deliveries, callback requests, status notes, settings, commit claims), the
// errors callers decide on, and the interfaces an implementation keeps
// (Store and its parts, contract.go). Transactions are opaque (DBTX, Tx):
// no database driver's type appears in a signature, so an engine can stand
// behind the contract without its callers knowing.
//
// The contract's rules are written once, here (issue 20 point 3, as River
// keeps its drivers to queries): DriverStore implements Store over a
// Driver, which runs the queries of one engine (driver.go) and decides
// nothing. The engines, store/postgres and store/sqlite, are drivers; what
// really differs between them (SQL dialect, locks, RETURNING forms, time
// encoding) stays behind the Driver's small methods. storetest is the
// suite DriverStore passes on each. The package must not know the flow:
// which transitions are legal is decided in flows, which calls
// ApplyTransition, the only writer of operations and bindings after
// creation. SQL lives in the drivers and nowhere else, and no database
// driver is imported here.
package store

import (
	"errors"
	"time"
)

// Errors of the store's contract. Callers use errors.Is.
var (
	// ErrNotFound: no row with that key.
	ErrNotFound = errors.New("not found")
	// ErrVersionConflict: the row changed since the caller read it
	// (optimistic concurrency); re-read and decide again.
	ErrVersionConflict = errors.New("version conflict")
	// ErrStepMismatch: the operation is no longer at the step the caller
	// expected; nothing was written.
	ErrStepMismatch = errors.New("operation step changed")
	// ErrBindingNotOwned: the binding now belongs to another operation (it
	// was re-applied), so this operation's transition is stale.
	ErrBindingNotOwned = errors.New("binding belongs to another operation")
	// ErrActiveChange: the binding has an operation that is not in a
	// reappliable status.
	ErrActiveChange = errors.New("binding has an active change")
	// ErrDuplicate: a dedupe key (delivery, callback request) was seen before.
	ErrDuplicate = errors.New("duplicate")
)

// File is one file of a change: Action is create, update or delete
// (empty means create-or-update, decided against the repository).
type File struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Action  string `json:"action,omitempty"`
}

// Platform names (operations.platform and the platform column of every
// row keyed by a project id and a merge or pull request number; issue 15).
const (
	// PlatformGitLab is GitLab, the default of rows written before the
	// column existed.
	PlatformGitLab = "gitlab"
	// PlatformGitHub is GitHub (github.com or GitHub Enterprise Server).
	PlatformGitHub = "github"
)

// PlatformOr returns name, or PlatformGitLab when name is "" (callers and
// rows from before issue 15 name no platform).
func PlatformOr(name string) string {
	if name == "" {
		return PlatformGitLab
	}
	return name
}

// Operation is one change (DESIGN §2): what was requested and where it
// stands. Step is a flows.StepCode; Status is the binding status it implies.
type Operation struct {
	ID string
	// Platform is where the change's merge or pull request lives:
	// PlatformGitLab or PlatformGitHub (column operations.platform). A
	// project id and a request number are unique only within one
	// platform; every lookup by them names it. "" is PlatformGitLab.
	Platform       string
	SubjectID      string
	TargetKey      string
	Project        string // the path the platform answered at submit ("group/repo"); older rows: as submitted
	ProjectID      int64  // resolved GitLab project id, 0 until known
	TargetBranch   string
	SourceBranch   string
	Title          string
	Description    string
	Files          []File
	RequestedBy    string
	ApprovalFirst  bool
	Step           int
	Status         string
	Version        int64
	TicketID       string
	MRIID          int64
	MRWebURL       string
	HeadSHA        string
	PipelineID     int64
	PipelineURL    string
	MergeCommitSHA string
	Rounds         int    // merge/rebase rounds or retries used in the current phase
	Detail         string // the last failure reason, shown to people
	IdempotencyKey string
	// RolloutID groups the changes submitted with one rollout_id (issue 25
	// point 3; column operations.rollout_id); "" for none. Their progress is
	// read as one (ReadRollout) and notified as one (TransitionParams.Rollout).
	RolloutID string
	// Adopted marks a change that carries a merge request a developer
	// opened (issue 25 point 1; column operations.adopted): it has no
	// Files, its create step records that merge request instead of opening
	// one, and letting it go (a /cancel, the label removed) leaves the
	// merge request open and its branch in place.
	Adopted       bool
	StepStartedAt time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Binding is the relation (subject_id, target_key) and the operation that
// currently owns it.
type Binding struct {
	SubjectID   string
	TargetKey   string
	OperationID string
	Status      string
	Version     int64
	UpdatedAt   time.Time
}
