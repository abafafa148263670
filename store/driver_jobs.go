package store

import (
	"context"
	"fmt"
	"time"
)

// ResumeStep continues an operation at its current step with at most one
// job per (operation, step) (issue 9 defect 7): in one transaction holding
// the operation's lock it checks the step, records p.Event, and either
// makes the step's live job (available, pending, scheduled, running or
// retryable) due now, when it waits for a snooze or a retry, or, when there
// is none, enqueues p.Jobs. Concurrent calls are serialised by the lock, so
// they never enqueue two jobs. It reports whether it enqueued. Errors:
// ErrNotFound, ErrStepMismatch (wrapped).
func (s *DriverStore) ResumeStep(ctx context.Context, p ResumeStepParams) (bool, error) {
	queued := false
	err := s.inTx(ctx, func(_ Tx, x Executor) error {
		step, status, err := x.OperationStepStatusForUpdate(ctx, p.OperationID)
		if err != nil {
			return err
		}
		if step != p.Step {
			return fmt.Errorf("%w: at %d, expected %d", ErrStepMismatch, step, p.Step)
		}
		live, err := x.JobWakeLiveOfStep(ctx, p.OperationID, p.Step, p.Kinds, s.Now())
		if err != nil {
			return fmt.Errorf("finding the live job of step %d: %w", p.Step, err)
		}
		if _, err := s.appendEventSteps(ctx, x, p.OperationID, p.Event, step, step, status, status); err != nil {
			return err
		}
		if live > 0 {
			return nil
		}
		queued = true
		return enqueue(ctx, x, p.Jobs)
	})
	if err != nil {
		return false, fmt.Errorf("resuming %s at step %d: %w", p.OperationID, p.Step, err)
	}
	return queued, nil
}

// WakeStep makes the waiting job (scheduled, retryable, or available
// later) of kinds for operationID's step available now, and reports
// whether the step has a live job: something the job waits for happened
// (a webhook that came early), so it looks now instead of at its next
// poll. One statement, no event (ResumeStep records one).
func (s *DriverStore) WakeStep(ctx context.Context, db DBTX, operationID string, step int, kinds []string) (bool, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return false, err
	}
	live, err := x.JobWakeLiveOfStep(ctx, operationID, step, kinds, s.Now())
	if err != nil {
		return false, fmt.Errorf("waking the job of %s at step %d: %w", operationID, step, err)
	}
	return live > 0, nil
}

// RetireStepJobs deletes the queued jobs (available, pending, scheduled or
// retryable) of kinds whose args name operationID and step: jobs left from
// an earlier visit of the step. A move into step calls it in its own
// transaction before it enqueues the step's new job, so that the step has
// one job, not one per visit (issue 9 defect 7). A running job is left
// alone: it finds the operation moved under it and its write refused. It
// returns how many jobs it deleted.
func (s *DriverStore) RetireStepJobs(ctx context.Context, db DBTX, operationID string, step int, kinds []string) (int, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return 0, err
	}
	n, err := x.JobRetireOfStep(ctx, operationID, step, kinds)
	if err != nil {
		return 0, fmt.Errorf("retiring the earlier jobs of %s at step %d: %w", operationID, step, err)
	}
	return int(n), nil
}

// WakeStaleWaits makes the scheduled polling job of up to p.Limit waiting
// operations due now, so that it reads GitLab at once instead of at its
// next (long) interval: what a lost webhook would have told us. It returns
// how many jobs it woke. One statement; on PostgreSQL jobs locked by
// another transaction are skipped.
func (s *DriverStore) WakeStaleWaits(ctx context.Context, db DBTX, p WakeParams) (int, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return 0, err
	}
	n, err := x.JobWakeStaleWaits(ctx, p, s.Now())
	if err != nil {
		return 0, fmt.Errorf("waking stale waits: %w", err)
	}
	return int(n), nil
}

// PostponeStepJobs moves the scheduled jobs of kinds for operationID's step
// that are due before until to until, and returns how many it moved: a
// webhook for the change's merge request arrived, so its next poll waits a
// whole interval (issue 12 point 4). One statement.
func (s *DriverStore) PostponeStepJobs(ctx context.Context, db DBTX, operationID string, step int, kinds []string, until time.Time) (int, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return 0, err
	}
	n, err := x.JobPostponeOfStep(ctx, operationID, step, kinds, until.UTC())
	if err != nil {
		return 0, fmt.Errorf("postponing the polls of %s: %w", operationID, err)
	}
	return int(n), nil
}

// IsJobLeader reports whether the River client clientID is the elected
// leader now (River's table river_leader). Only the leader runs
// cluster-wide duties such as the active changes gauge.
func (s *DriverStore) IsJobLeader(ctx context.Context, db DBTX, clientID string) (bool, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return false, err
	}
	ok, err := x.JobLeaderIs(ctx, clientID)
	if err != nil {
		return false, fmt.Errorf("reading the job queue leader: %w", err)
	}
	return ok, nil
}
