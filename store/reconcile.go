package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
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

// ListReconcileCandidates returns up to p.Limit MERGED operations with a
// merge commit whose updated_at lies strictly inside (p.After, p.Before),
// ordered by project, target branch and age, each with its watermark
// verdict from deploy_confirmations (see RecordDeployConfirmation). One
// query, whatever the number of rows.
func (s *Store) ListReconcileCandidates(ctx context.Context, db DBTX, p ReconcileParams) ([]ReconcileCandidate, error) {
	rows, err := q(db).Query(ctx, `SELECT `+prefixedOpColumns+`, EXISTS (
			SELECT 1 FROM deploy_confirmations d
			WHERE d.project_id = o.project_id AND d.target_branch = o.target_branch
			  AND d.mr_iid >= o.mr_iid AND d.confirmed_at >= o.updated_at)
		FROM operations o
		WHERE o.status = $1 AND o.merge_commit_sha <> '' AND o.updated_at > $2 AND o.updated_at < $3
		ORDER BY o.project_id, o.target_branch, o.updated_at, o.id
		LIMIT $4`, StatusMerged, p.After, p.Before, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("listing reconcile candidates: %w", err)
	}
	defer rows.Close()
	var out []ReconcileCandidate
	for rows.Next() {
		var c ReconcileCandidate
		var wm bool
		op, err := scanOperation(extraScan{rows, []any{&wm}})
		if err != nil {
			return nil, fmt.Errorf("listing reconcile candidates: %w", err)
		}
		c.Operation, c.Watermarked = op, wm
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing reconcile candidates: %w", err)
	}
	return out, nil
}

// DeployConfirmation is a deploy confirmed for merge request MRIID into
// TargetBranch of project ProjectID (a deploy callback with a success
// status for a merged change).
type DeployConfirmation struct {
	ProjectID    int64
	TargetBranch string
	MRIID        int64
}

// RecordDeployConfirmation stores that c's deploy was confirmed now (at the
// store clock), raising the watermark of c's project and target branch.
// One row per MR; a later confirmation of the same MR moves its time
// forward, never back.
func (s *Store) RecordDeployConfirmation(ctx context.Context, db DBTX, c DeployConfirmation) error {
	_, err := q(db).Exec(ctx, `INSERT INTO deploy_confirmations (project_id, target_branch, mr_iid, confirmed_at)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (project_id, target_branch, mr_iid)
		DO UPDATE SET confirmed_at = greatest(deploy_confirmations.confirmed_at, EXCLUDED.confirmed_at)`,
		c.ProjectID, c.TargetBranch, c.MRIID, s.Now())
	if err != nil {
		return fmt.Errorf("recording deploy confirmation of !%d into %s: %w", c.MRIID, c.TargetBranch, err)
	}
	return nil
}

// prefixedOpColumns is opColumns qualified with the alias "o".
var prefixedOpColumns = func() string {
	cols := strings.Split(opColumns, ",")
	for i, c := range cols {
		c = strings.TrimSpace(c)
		switch {
		case strings.HasPrefix(c, "coalesce("):
			cols[i] = "coalesce(o." + strings.TrimPrefix(c, "coalesce(")
		case c == "'')":
			cols[i] = c
		default:
			cols[i] = "o." + c
		}
	}
	return strings.Join(cols, ", ")
}()

// extraScan scans a row of operation columns followed by extra columns.
type extraScan struct {
	row   pgx.Row
	extra []any
}

// Scan implements pgx.Row.
func (r extraScan) Scan(dest ...any) error { return r.row.Scan(append(dest, r.extra...)...) }

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

// WakeStaleWaits makes the scheduled polling job of up to p.Limit waiting
// operations due now, so that it reads GitLab at once instead of at its
// next (long) interval: what a lost webhook would have told us. It returns
// how many jobs it woke. One statement.
func (s *Store) WakeStaleWaits(ctx context.Context, db DBTX, p WakeParams) (int, error) {
	tag, err := q(db).Exec(ctx, `UPDATE river_job SET scheduled_at = $6 WHERE id IN (
			SELECT j.id FROM river_job j JOIN operations o ON o.id = j.args->>'operation_id'
			WHERE j.state = 'scheduled' AND j.kind = ANY($2) AND j.scheduled_at > $4
			  AND (j.args->>'step')::int = o.step AND o.step = ANY($1) AND o.updated_at < $3
			ORDER BY o.updated_at LIMIT $5 FOR UPDATE OF j SKIP LOCKED)`,
		p.Steps, p.Kinds, p.QuietBefore, p.WakeAfter, p.Limit, s.Now())
	if err != nil {
		return 0, fmt.Errorf("waking stale waits: %w", err)
	}
	return int(tag.RowsAffected()), nil
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

// ListStuckOperations returns up to p.Limit operations at one of p.Steps,
// unchanged since p.QuietBefore, that have no live job (available, pending,
// scheduled, running or retryable) of one of p.Kinds for their current step.
// Oldest first. One query.
func (s *Store) ListStuckOperations(ctx context.Context, db DBTX, p StuckParams) ([]Operation, error) {
	ops, err := collectOperations(q(db).Query(ctx, `SELECT `+prefixedOpColumns+` FROM operations o
		WHERE o.step = ANY($1) AND o.updated_at < $3 AND NOT EXISTS (
			SELECT 1 FROM river_job j
			WHERE j.args->>'operation_id' = o.id AND (j.args->>'step')::int = o.step
			  AND j.kind = ANY($2)
			  AND j.state IN ('available', 'pending', 'scheduled', 'running', 'retryable'))
		ORDER BY o.updated_at LIMIT $4`, p.Steps, p.Kinds, p.QuietBefore, p.Limit))
	if err != nil {
		return nil, fmt.Errorf("listing stuck operations: %w", err)
	}
	return ops, nil
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

// ListWatchedMRs returns up to p.Limit operations at one of p.Steps that
// have a merge request, with ids after p.After, in id order (a keyset page:
// the caller passes the last id back to go on, "" to start over). One
// query.
func (s *Store) ListWatchedMRs(ctx context.Context, db DBTX, p WatchParams) ([]Operation, error) {
	ops, err := collectOperations(q(db).Query(ctx, `SELECT `+opColumns+` FROM operations
		WHERE status = ANY($2) AND step = ANY($1) AND mr_iid > 0 AND id > $3
		ORDER BY id LIMIT $4`, p.Steps, p.Statuses, p.After, p.Limit))
	if err != nil {
		return nil, fmt.Errorf("listing watched merge requests: %w", err)
	}
	return ops, nil
}
