package postgres

import (
	"context"
	"errors"
	"fmt"

	"changebot/store"

	"github.com/jackc/pgx/v5"
)

// ResumeStep continues an operation at its current step with at most one
// job per (operation, step) (issue 9 defect 7): in one transaction holding
// the operation's row lock it checks the step, records p.Event, and either
// makes the step's live job (available, pending, scheduled, running or
// retryable) due now, when it waits for a snooze or a retry, or, when there
// is none, enqueues p.Jobs. Concurrent calls are serialised by the row
// lock, so they never enqueue two jobs. It reports whether it enqueued.
// Errors: ErrNotFound, ErrStepMismatch (wrapped).
func (s *Store) ResumeStep(ctx context.Context, p store.ResumeStepParams) (bool, error) {
	queued := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := queries.OperationStepStatusForUpdate(ctx, tx, p.OperationID)
		if errors.Is(err, pgx.ErrNoRows) {
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
		// so sqlc does not know it) through its JSON args (a jsonb containment lookup).
		var live int
		err = tx.QueryRow(ctx, `WITH live AS (
				SELECT id, state FROM river_job
				WHERE args @> jsonb_build_object('operation_id', $1::text, 'step', $2::int) AND kind = ANY($3)
				  AND state IN ('available', 'pending', 'scheduled', 'running', 'retryable')),
			woken AS (
				UPDATE river_job SET scheduled_at = $4
				WHERE id IN (SELECT id FROM live WHERE state IN ('available', 'scheduled', 'retryable')) AND scheduled_at > $4)
			SELECT count(*) FROM live`, p.OperationID, p.Step, p.Kinds, s.Now()).Scan(&live)
		if err != nil {
			return fmt.Errorf("finding the live job of step %d: %w", p.Step, err)
		}
		if _, err := s.appendEventSteps(ctx, tx, p.OperationID, p.Event, step, step, status, status); err != nil {
			return err
		}
		if live > 0 {
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

// RetireStepJobs deletes the queued jobs (available, pending, scheduled or
// retryable) of kinds whose args name operationID and step: jobs left from
// an earlier visit of the step. A move into step calls it in its own
// transaction before it enqueues the step's new job, so that the step has
// one job, not one per visit (issue 9 defect 7). A running job is left
// alone: it finds the operation moved under it and its write refused. It
// returns how many jobs it deleted.
func (s *Store) RetireStepJobs(ctx context.Context, db store.DBTX, operationID string, step int, kinds []string) (int, error) {
	// Hand-written: it reads River's river_job table (not in our migrations,
	// so sqlc does not know it) through its JSON args (a jsonb containment lookup).
	tag, err := q(db).Exec(ctx, `DELETE FROM river_job
		WHERE args @> jsonb_build_object('operation_id', $1::text, 'step', $2::int) AND kind = ANY($3)
		  AND state IN ('available', 'pending', 'scheduled', 'retryable')`, operationID, step, kinds)
	if err != nil {
		return 0, fmt.Errorf("retiring the earlier jobs of %s at step %d: %w", operationID, step, err)
	}
	return int(tag.RowsAffected()), nil
}
