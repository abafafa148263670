package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"changebot/store"
	"changebot/store/sqlite/internal/dbsqlc"
	"changebot/store/sqlite/internal/dbtime"
)

// riverTS is t as River's SQLite driver stores times (milliseconds), for
// comparisons with and writes to its columns.
func riverTS(t time.Time) string {
	return t.UTC().Round(time.Millisecond).Format("2006-01-02 15:04:05.000")
}

// riverNow is SQLite's clock in River's format.
const riverNow = `strftime('%Y-%m-%d %H:%M:%f', 'now')`

// ResumeStep implements store.Jobs.
func (s *Store) ResumeStep(ctx context.Context, p store.ResumeStepParams) (bool, error) {
	queued := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		c := conn{ex: tx}
		cur, err := queries.OperationStepStatus(ctx, tx, p.OperationID)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		step, status := cur.Step, cur.Status
		if step != p.Step {
			return fmt.Errorf("%w: at %d, expected %d", store.ErrStepMismatch, step, p.Step)
		}
		// Hand-written: it reads River's river_job table (not in our migrations,
		// so sqlc does not know it) through its JSON args (json_extract).
		kinds, kargs := in(p.Kinds)
		live := `SELECT id FROM river_job
			WHERE json_extract(args, '$.operation_id') = ? AND json_extract(args, '$.step') = ? AND kind IN (` + kinds + `)
			  AND state IN ('available', 'pending', 'scheduled', 'running', 'retryable')`
		args := append([]any{p.OperationID, p.Step}, kargs...)
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM (`+live+`)`, args...).Scan(&n); err != nil {
			return fmt.Errorf("finding the live job of step %d: %w", p.Step, err)
		}
		due := riverTS(s.Now())
		if _, err := c.Exec(ctx, `UPDATE river_job SET scheduled_at = ?
			WHERE id IN (`+live+`) AND state IN ('available', 'scheduled', 'retryable') AND scheduled_at > ?`,
			append(append([]any{due}, args...), due)...); err != nil {
			return fmt.Errorf("waking the live job of step %d: %w", p.Step, err)
		}
		if _, err := s.appendEventSteps(ctx, tx, p.OperationID, p.Event, step, step, status, status); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		queued = true
		return s.enqueue(ctx, tx, p.Jobs)
	})
	if err != nil {
		return false, fmt.Errorf("resuming %s at step %d: %w", p.OperationID, p.Step, err)
	}
	return queued, nil
}

// RetireStepJobs implements store.Jobs.
func (s *Store) RetireStepJobs(ctx context.Context, db store.DBTX, operationID string, step int, kinds []string) (int, error) {
	// Hand-written: it reads River's river_job table (not in our migrations,
	// so sqlc does not know it) through its JSON args (json_extract).
	ph, kargs := in(kinds)
	res, err := q(db).Exec(ctx, `DELETE FROM river_job
		WHERE json_extract(args, '$.operation_id') = ? AND json_extract(args, '$.step') = ? AND kind IN (`+ph+`)
		  AND state IN ('available', 'pending', 'scheduled', 'retryable')`, append([]any{operationID, step}, kargs...)...)
	if err != nil {
		return 0, fmt.Errorf("retiring the earlier jobs of %s at step %d: %w", operationID, step, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// WakeStaleWaits implements store.Jobs. Writers are serialised, so no row
// is skipped as locked.
func (s *Store) WakeStaleWaits(ctx context.Context, db store.DBTX, p store.WakeParams) (int, error) {
	// Hand-written: it reads River's river_job table (not in our migrations,
	// so sqlc does not know it) through its JSON args (json_extract).
	steps, sargs := in(p.Steps)
	kinds, kargs := in(p.Kinds)
	args := append(append(kargs, riverTS(p.WakeAfter)), sargs...)
	args = append(args, p.QuietBefore, p.Limit)
	res, err := q(db).Exec(ctx, `UPDATE river_job SET scheduled_at = ? WHERE id IN (
			SELECT j.id FROM river_job j JOIN operations o ON o.id = json_extract(j.args, '$.operation_id')
			WHERE j.state = 'scheduled' AND j.kind IN (`+kinds+`) AND j.scheduled_at > ?
			  AND json_extract(j.args, '$.step') = o.step AND o.step IN (`+steps+`) AND o.updated_at < ?
			ORDER BY o.updated_at LIMIT ?)`, append([]any{riverTS(s.Now())}, args...)...)
	if err != nil {
		return 0, fmt.Errorf("waking stale waits: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// PostponeStepJobs implements store.Jobs.
func (s *Store) PostponeStepJobs(ctx context.Context, db store.DBTX, operationID string, step int, kinds []string, until time.Time) (int, error) {
	// Hand-written: it writes River's river_job table (not in our
	// migrations) through its JSON args (json_extract).
	kindList, kargs := in(kinds)
	res, err := q(db).Exec(ctx, `UPDATE river_job SET scheduled_at = ?
		WHERE state = 'scheduled' AND kind IN (`+kindList+`) AND json_extract(args, '$.operation_id') = ?
		  AND json_extract(args, '$.step') = ? AND scheduled_at < ?`,
		append(append([]any{riverTS(until)}, kargs...), operationID, step, riverTS(until))...)
	if err != nil {
		return 0, fmt.Errorf("postponing the polls of %s: %w", operationID, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// IsJobLeader implements store.Jobs.
func (s *Store) IsJobLeader(ctx context.Context, db store.DBTX, clientID string) (bool, error) {
	// Hand-written: river_leader is River's table, not in our migrations.
	var ok bool
	err := q(db).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM river_leader WHERE leader_id = ? AND expires_at > `+riverNow+`)`,
		clientID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("reading the job queue leader: %w", err)
	}
	return ok, nil
}

// ListStuckOperations implements store.Operations.
func (s *Store) ListStuckOperations(ctx context.Context, db store.DBTX, p store.StuckParams) ([]store.Operation, error) {
	// Hand-written: it reads River's river_job table (not in our migrations,
	// so sqlc does not know it) through its JSON args (json_extract).
	steps, sargs := in(p.Steps)
	kinds, kargs := in(p.Kinds)
	args := append(append(sargs, p.QuietBefore), kargs...)
	ops, err := collectOperations(q(db).Query(ctx, `SELECT `+prefixedOpColumns+` FROM operations o
		WHERE o.step IN (`+steps+`) AND o.updated_at < ? AND NOT EXISTS (
			SELECT 1 FROM river_job j
			WHERE json_extract(j.args, '$.operation_id') = o.id AND json_extract(j.args, '$.step') = o.step
			  AND j.kind IN (`+kinds+`)
			  AND j.state IN ('available', 'pending', 'scheduled', 'running', 'retryable'))
		ORDER BY o.updated_at LIMIT ?`, append(args, p.Limit)...))
	if err != nil {
		return nil, fmt.Errorf("listing stuck operations: %w", err)
	}
	return ops, nil
}

// ListWatchedMRs implements store.Operations.
func (s *Store) ListWatchedMRs(ctx context.Context, db store.DBTX, p store.WatchParams) ([]store.Operation, error) {
	// Hand-written: sqlc numbers the parameters after two sqlc.slice lists
	// (?3, ?4) as if each list were one value, so with more than one status
	// or step LIMIT read a step and SQLite answered "datatype mismatch".
	statuses, stArgs := in(p.Statuses)
	steps, spArgs := in(p.Steps)
	args := append(append(stArgs, spArgs...), p.After, p.Limit)
	ops, err := collectOperations(q(db).Query(ctx, `SELECT `+opColumns+` FROM operations
		WHERE status IN (`+statuses+`) AND step IN (`+steps+`) AND mr_iid > 0 AND id > ?
		ORDER BY id LIMIT ?`, args...))
	if err != nil {
		return nil, fmt.Errorf("listing watched merge requests: %w", err)
	}
	return ops, nil
}

// ListReconcileCandidates implements store.Operations.
func (s *Store) ListReconcileCandidates(ctx context.Context, db store.DBTX, p store.ReconcileParams) ([]store.ReconcileCandidate, error) {
	g, err := q(db).gen()
	if err != nil {
		return nil, err
	}
	rows, err := queries.ReconcileCandidates(ctx, g, &dbsqlc.ReconcileCandidatesParams{Status: store.StatusMerged,
		UpdatedAfter: dbtime.Of(p.After), UpdatedBefore: dbtime.Of(p.Before), Max: int64(p.Limit)})
	if err != nil {
		return nil, fmt.Errorf("listing reconcile candidates: %w", err)
	}
	var out []store.ReconcileCandidate
	for _, r := range rows {
		op, err := fromRow(r.Operations)
		if err != nil {
			return nil, fmt.Errorf("listing reconcile candidates: %w", err)
		}
		out = append(out, store.ReconcileCandidate{Operation: op, Watermarked: r.Watermarked})
	}
	return out, nil
}

// RecordDeployConfirmation implements store.Operations.
func (s *Store) RecordDeployConfirmation(ctx context.Context, db store.DBTX, c store.DeployConfirmation) error {
	g, err := q(db).gen()
	if err != nil {
		return err
	}
	err = queries.DeployConfirmationRecord(ctx, g, &dbsqlc.DeployConfirmationRecordParams{ProjectID: c.ProjectID,
		TargetBranch: c.TargetBranch, MrIid: c.MRIID, ConfirmedAt: dbtime.Of(s.Now())})
	if err != nil {
		return fmt.Errorf("recording deploy confirmation of !%d into %s: %w", c.MRIID, c.TargetBranch, err)
	}
	return nil
}
