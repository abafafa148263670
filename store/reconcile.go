package store

import (
	"time"
)

// ReconcileCandidate is a MERGED operation the reconciler looks at, with the
// watermark verdict computed in the same query.
type ReconcileCandidate struct {
	Operation
	// Watermarked is true when a deploy was confirmed for an MR of the same
	// project and target branch with an iid at least this one's after this
	// operation last changed: the watermark rule (DESIGN §3 step 8) says the
	// later deploy included it.
	Watermarked bool
}

// ReconcileParams select reconcile candidates.
type ReconcileParams struct {
	// After and Before bound updated_at (exclusive): the window
	// (now - max_age, now - min_age).
	After, Before time.Time
	// Limit bounds the rows of one run.
	Limit int
}

// DeployConfirmation is a deploy confirmed for merge request MRIID into
// TargetBranch of project ProjectID (a deploy callback with a success
// status for a merged change).
type DeployConfirmation struct {
	ProjectID    int64
	TargetBranch string
	MRIID        int64
}

// WakeParams select the waiting jobs WakeStaleWaits wakes.
type WakeParams struct {
	// Steps are the waiting steps (on a pipeline or a merge).
	Steps []int
	// Kinds are the job kinds that poll those waits.
	Kinds []string
	// QuietBefore: only operations unchanged since before this time.
	QuietBefore time.Time
	// WakeAfter: only jobs scheduled later than this time (a job due soon
	// is left alone).
	WakeAfter time.Time
	// Limit bounds the jobs woken per call.
	Limit int
}

// StuckParams select the operations ListStuckOperations returns.
type StuckParams struct {
	// Steps are the in-progress steps that always have a job while they
	// last.
	Steps []int
	// Kinds are the step job kinds (a status-note job does not count).
	Kinds []string
	// QuietBefore: only operations unchanged since before this time.
	QuietBefore time.Time
	// Limit bounds the rows.
	Limit int
}

// WatchParams select the operations ListWatchedMRs returns.
type WatchParams struct {
	// Steps are the waiting steps whose merge request is watched.
	Steps []int
	// Statuses are the binding statuses of those steps (they let the
	// query use the status index).
	Statuses []string
	// After is the keyset cursor: only operations with an id greater than
	// it ("" for the first page).
	After string
	// Limit bounds the rows.
	Limit int
}
