package postgres

import (
	"context"
	"fmt"
	"strings"

	"changebot/store"

	"github.com/jackc/pgx/v5"
)

// ListReconcileCandidates returns up to p.Limit MERGED operations with a
// merge commit whose updated_at lies strictly inside (p.After, p.Before),
// ordered by project, target branch and age, each with its watermark
// verdict from deploy_confirmations (see RecordDeployConfirmation). One
// query, whatever the number of rows.
func (s *Store) ListReconcileCandidates(ctx context.Context, db store.DBTX, p store.ReconcileParams) ([]store.ReconcileCandidate, error) {
	rows, err := q(db).Query(ctx, `SELECT `+prefixedOpColumns+`, EXISTS (
			SELECT 1 FROM deploy_confirmations d
			WHERE d.project_id = o.project_id AND d.target_branch = o.target_branch
			  AND d.mr_iid >= o.mr_iid AND d.confirmed_at >= o.updated_at)
		FROM operations o
		WHERE o.status = $1 AND o.merge_commit_sha <> '' AND o.updated_at > $2 AND o.updated_at < $3
		ORDER BY o.project_id, o.target_branch, o.updated_at, o.id
		LIMIT $4`, store.StatusMerged, p.After, p.Before, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("listing reconcile candidates: %w", err)
	}
	defer rows.Close()
	var out []store.ReconcileCandidate
	for rows.Next() {
		var c store.ReconcileCandidate
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

// RecordDeployConfirmation stores that c's deploy was confirmed now (at the
// store clock), raising the watermark of c's project and target branch.
// One row per MR; a later confirmation of the same MR moves its time
// forward, never back.
func (s *Store) RecordDeployConfirmation(ctx context.Context, db store.DBTX, c store.DeployConfirmation) error {
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

// WakeStaleWaits makes the scheduled polling job of up to p.Limit waiting
// operations due now, so that it reads GitLab at once instead of at its
// next (long) interval: what a lost webhook would have told us. It returns
// how many jobs it woke. One statement.
func (s *Store) WakeStaleWaits(ctx context.Context, db store.DBTX, p store.WakeParams) (int, error) {
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

// ListStuckOperations returns up to p.Limit operations at one of p.Steps,
// unchanged since p.QuietBefore, that have no live job (available, pending,
// scheduled, running or retryable) of one of p.Kinds for their current step.
// Oldest first. One query.
func (s *Store) ListStuckOperations(ctx context.Context, db store.DBTX, p store.StuckParams) ([]store.Operation, error) {
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

// ListWatchedMRs returns up to p.Limit operations at one of p.Steps that
// have a merge request, with ids after p.After, in id order (a keyset page:
// the caller passes the last id back to go on, "" to start over). One
// query.
func (s *Store) ListWatchedMRs(ctx context.Context, db store.DBTX, p store.WatchParams) ([]store.Operation, error) {
	ops, err := collectOperations(q(db).Query(ctx, `SELECT `+opColumns+` FROM operations
		WHERE status = ANY($2) AND step = ANY($1) AND mr_iid > 0 AND id > $3
		ORDER BY id LIMIT $4`, p.Steps, p.Statuses, p.After, p.Limit))
	if err != nil {
		return nil, fmt.Errorf("listing watched merge requests: %w", err)
	}
	return ops, nil
}
