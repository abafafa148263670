package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// GetOperation reads one operation; ErrNotFound (wrapped) when there is
// none.
func (s *DriverStore) GetOperation(ctx context.Context, db DBTX, id string) (Operation, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return Operation{}, err
	}
	op, err := x.OperationGet(ctx, id)
	if err != nil {
		return Operation{}, fmt.Errorf("reading operation %s: %w", id, err)
	}
	return op, nil
}

// OperationExists reports whether an operation row with id exists (the
// create step's insert-or-advance question, DESIGN §3 step 4).
func (s *DriverStore) OperationExists(ctx context.Context, db DBTX, id string) (bool, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return false, err
	}
	ok, err := x.OperationExists(ctx, id)
	if err != nil {
		return false, fmt.Errorf("checking operation %s: %w", id, err)
	}
	return ok, nil
}

// FindOperationByIdempotencyKey returns the operation submitted with
// idempotency key key; ErrNotFound (wrapped) when none was.
func (s *DriverStore) FindOperationByIdempotencyKey(ctx context.Context, db DBTX, key string) (Operation, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return Operation{}, err
	}
	op, err := x.OperationGetByIdempotencyKey(ctx, key)
	if err != nil {
		return Operation{}, fmt.Errorf("finding the operation of an idempotency key: %w", err)
	}
	return op, nil
}

// FindOperationByMR returns the newest operation that opened merge request
// iid in project projectID of platform ("" is GitLab); ErrNotFound
// (wrapped) when none did.
func (s *DriverStore) FindOperationByMR(ctx context.Context, db DBTX, platform string, projectID, iid int64) (Operation, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return Operation{}, err
	}
	op, err := x.OperationNewestOfMR(ctx, PlatformOr(platform), projectID, iid)
	if err != nil {
		return Operation{}, fmt.Errorf("finding operation of %s !%d in project %d: %w", PlatformOr(platform), iid, projectID, err)
	}
	return op, nil
}

// ListOperationsByStatus returns up to limit operations in one of statuses
// whose updated_at lies in [from, to), oldest first. One query.
func (s *DriverStore) ListOperationsByStatus(ctx context.Context, db DBTX, statuses []string, from, to time.Time, limit int) ([]Operation, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	ops, err := x.OperationListByStatus(ctx, statuses, from, to, limit)
	if err != nil {
		return nil, fmt.Errorf("listing operations by status: %w", err)
	}
	return ops, nil
}

// ListMergedByProject returns MERGED operations of projectID whose merge
// commit is set, oldest first. One query.
func (s *DriverStore) ListMergedByProject(ctx context.Context, db DBTX, platform string, projectID int64, limit int) ([]Operation, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	ops, err := x.OperationListMergedByProject(ctx, PlatformOr(platform), projectID, StatusMerged, limit)
	if err != nil {
		return nil, fmt.Errorf("listing merged operations of project %d: %w", projectID, err)
	}
	return ops, nil
}

// ListOperationIDs returns up to limit operation ids greater than after, in
// order (for paging through every operation).
func (s *DriverStore) ListOperationIDs(ctx context.Context, db DBTX, after string, limit int) ([]string, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	ids, err := x.OperationListIDs(ctx, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing operation ids: %w", err)
	}
	return ids, nil
}

// ListChanges returns up to p.Limit operations matching p's filters,
// newest first by id, with ids before p.Before (a keyset page: the caller
// passes the last id back to go on). One query whose filters apply only
// when set.
func (s *DriverStore) ListChanges(ctx context.Context, db DBTX, p ListParams) ([]Operation, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	ops, err := x.OperationList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("listing changes: %w", err)
	}
	return ops, nil
}

// ListWatchedMRs returns up to p.Limit operations at one of p.Steps that
// have a merge request, with ids after p.After, in id order (a keyset page:
// the caller passes the last id back to go on, "" to start over). One
// query.
func (s *DriverStore) ListWatchedMRs(ctx context.Context, db DBTX, p WatchParams) ([]Operation, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	ops, err := x.OperationListWatched(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("listing watched merge requests: %w", err)
	}
	return ops, nil
}

// ListStuckOperations returns up to p.Limit operations at one of p.Steps,
// unchanged since p.QuietBefore, that have no live job (available, pending,
// scheduled, running or retryable) of one of p.Kinds for their current step.
// Oldest first. One query.
func (s *DriverStore) ListStuckOperations(ctx context.Context, db DBTX, p StuckParams) ([]Operation, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	ops, err := x.OperationListStuck(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("listing stuck operations: %w", err)
	}
	return ops, nil
}

// CountActive counts operations that hold their binding: every status but
// the reappliable ones (see Reappliable). Used for admission control. One
// query over the active statuses' index ranges (CountByStatusWithAge), so
// its cost does not grow with the number of finished changes.
func (s *DriverStore) CountActive(ctx context.Context, db DBTX) (int, error) {
	counts, err := s.CountByStatusWithAge(ctx, db, ActiveStatuses())
	if err != nil {
		return 0, fmt.Errorf("counting active operations: %w", err)
	}
	n := 0
	for _, c := range counts {
		n += c.Count
	}
	return n, nil
}

// CountByStatusWithAge returns one StatusAge per status of statuses, in
// that order, zero counts included (nil for no statuses). One query; each
// status is read as a range of the (status, updated_at) index, so finished
// changes, whose statuses a caller leaves out, cost nothing however many
// there are.
func (s *DriverStore) CountByStatusWithAge(ctx context.Context, db DBTX, statuses []string) ([]StatusAge, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	rows, err := x.OperationCountByStatus(ctx, statuses)
	if err != nil {
		return nil, fmt.Errorf("counting operations by status: %w", err)
	}
	byStatus := make(map[string]StatusAge, len(rows))
	for _, r := range rows {
		byStatus[r.Status] = r
	}
	out := make([]StatusAge, len(statuses))
	for i, st := range statuses {
		out[i] = byStatus[st]
		out[i].Status = st
	}
	return out, nil
}

// ListReconcileCandidates returns up to p.Limit MERGED operations with a
// merge commit whose updated_at lies strictly inside (p.After, p.Before),
// ordered by project, target branch and age, each with its watermark
// verdict from deploy_confirmations (see RecordDeployConfirmation). One
// query, whatever the number of rows.
func (s *DriverStore) ListReconcileCandidates(ctx context.Context, db DBTX, p ReconcileParams) ([]ReconcileCandidate, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	out, err := x.ReconcileCandidates(ctx, StatusMerged, p)
	if err != nil {
		return nil, fmt.Errorf("listing reconcile candidates: %w", err)
	}
	return out, nil
}

// RecordDeployConfirmation stores that c's deploy was confirmed now (at the
// store clock), raising the watermark of c's project and target branch.
// One row per MR; a later confirmation of the same MR moves its time
// forward, never back.
func (s *DriverStore) RecordDeployConfirmation(ctx context.Context, db DBTX, c DeployConfirmation) error {
	x, err := s.d.Executor(db)
	if err != nil {
		return err
	}
	if err := x.DeployConfirmationRecord(ctx, c, s.Now()); err != nil {
		return fmt.Errorf("recording deploy confirmation of !%d into %s: %w", c.MRIID, c.TargetBranch, err)
	}
	return nil
}

// GetBinding reads a binding; ErrNotFound (wrapped) when there is none.
func (s *DriverStore) GetBinding(ctx context.Context, db DBTX, subjectID, targetKey string) (Binding, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return Binding{}, err
	}
	b, err := x.BindingGet(ctx, subjectID, targetKey)
	if err != nil {
		return Binding{}, fmt.Errorf("reading binding %s/%s: %w", subjectID, targetKey, err)
	}
	return b, nil
}

// CreateOperation inserts the operation, takes its binding, appends the
// first event and enqueues jobs, in one transaction. The binding is taken by
// inserting its row, or, when a row exists, by resetting it in place with the
// new operation id if its status is reappliable (IsReappliable: the old
// operation's late transitions then find no owner, ErrBindingNotOwned).
// Concurrent first changes for a binding that has no row yet are decided by
// the row's primary key: on PostgreSQL the insert of one waits for the
// other's transaction, then finds its row; SQLite's write lock serialises
// them. With an IdempotencyKey already used it returns the existing
// operation and created=false. An *ActiveChangeError (errors.Is
// ErrActiveChange) when the binding's operation holds it; then nothing is
// written.
func (s *DriverStore) CreateOperation(ctx context.Context, p CreateParams) (op Operation, created bool, err error) {
	op = p.Operation
	now := s.Now()
	op.Version, op.CreatedAt, op.UpdatedAt, op.StepStartedAt = 1, now, now, now
	err = s.inTx(ctx, func(_ Tx, x Executor) error {
		if op.IdempotencyKey != "" {
			existing, err := x.OperationGetByIdempotencyKey(ctx, op.IdempotencyKey)
			if err == nil {
				op, created = existing, false
				return nil
			}
			if !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		row := op
		row.Platform = PlatformOr(op.Platform)
		if err := x.OperationInsert(ctx, row); err != nil {
			if errors.Is(err, ErrUniqueViolation) && op.IdempotencyKey != "" {
				return ErrDuplicate
			}
			return fmt.Errorf("inserting operation: %w", err)
		}
		if err := takeBinding(ctx, x, op, now); err != nil {
			return err
		}
		if _, err := s.appendEventSteps(ctx, x, op.ID, p.Event, 0, op.Step, "", op.Status); err != nil {
			return err
		}
		created = true
		return enqueue(ctx, x, p.Jobs)
	})
	if errors.Is(err, ErrDuplicate) {
		// A concurrent request with the same idempotency key won the insert.
		existing, gerr := s.FindOperationByIdempotencyKey(ctx, s.DB(), op.IdempotencyKey)
		if gerr != nil {
			return Operation{}, false, fmt.Errorf("reading operation of idempotency key: %w", gerr)
		}
		return existing, false, nil
	}
	if err != nil {
		return Operation{}, false, fmt.Errorf("creating operation for %s/%s: %w", op.SubjectID, op.TargetKey, err)
	}
	return op, created, nil
}

// takeBinding makes op (already inserted in the transaction of x) the owner
// of its binding. The insert takes a binding that has no row; on a conflict
// PostgreSQL waits for a concurrent inserter's transaction, so the row
// locked next is the committed one. SELECT ... FOR UPDATE alone locks
// nothing when no row exists yet (issue 9, defect 2).
func takeBinding(ctx context.Context, x Executor, op Operation, now time.Time) error {
	b := Binding{SubjectID: op.SubjectID, TargetKey: op.TargetKey, OperationID: op.ID, Status: op.Status, UpdatedAt: now}
	inserted, err := x.BindingInsertIfAbsent(ctx, b)
	if err != nil {
		return fmt.Errorf("taking binding: %w", err)
	}
	if inserted {
		return nil
	}
	held, err := x.BindingGetForUpdate(ctx, op.SubjectID, op.TargetKey)
	if err != nil {
		// The row existed at the insert and bindings are never deleted.
		return fmt.Errorf("locking binding: %w", err)
	}
	if !IsReappliable(held.Status) {
		e := &ActiveChangeError{SubjectID: op.SubjectID, TargetKey: op.TargetKey, OperationID: held.OperationID, Status: held.Status}
		// Its merge request, for the person's answer; a failed read
		// leaves it out (the refusal stands either way).
		if holder, err := x.OperationGet(ctx, held.OperationID); err == nil {
			e.MRIID, e.Platform = holder.MRIID, holder.Platform
		}
		return e
	}
	if err := x.BindingReset(ctx, b); err != nil {
		return fmt.Errorf("resetting binding: %w", err)
	}
	return nil
}

// ApplyTransition is the one write of an operation's state (DESIGN §2). In
// one transaction it locks the operation row and then its binding row (fixed
// order; on SQLite the transaction's write lock stands for both), checks
// that the operation is still at ExpectStep and ExpectVersion and still
// owns its binding, runs Guard, updates the operation (step, status,
// version+1 and the fields Update sets), sets the binding's status, appends
// the event and enqueues Jobs; a move to another step of a change with a
// rollout then locks the rollout's row and tells its state (p.Rollout,
// RolloutNotice: operation, binding, rollout is the one lock order). Errors: ErrNotFound, ErrStepMismatch,
// ErrVersionConflict, ErrBindingNotOwned (all wrapped), or Guard's error; on
// any error nothing is written.
func (s *DriverStore) ApplyTransition(ctx context.Context, p TransitionParams) (Operation, Event, error) {
	var out Operation
	var ev Event
	err := s.inTx(ctx, func(tx Tx, x Executor) error {
		op, err := x.OperationGetForUpdate(ctx, p.OperationID)
		if err != nil {
			return err
		}
		b, err := x.BindingGetForUpdate(ctx, op.SubjectID, op.TargetKey)
		if errors.Is(err, ErrNotFound) {
			return ErrBindingNotOwned
		}
		if err != nil {
			return fmt.Errorf("locking binding: %w", err)
		}
		if err := checkTransition(p, op, b); err != nil {
			return err
		}
		if p.Guard != nil {
			if err := p.Guard(ctx, tx, op, b); err != nil {
				return err
			}
		}
		fromStep, fromStatus := op.Step, op.Status
		if p.Update != nil {
			p.Update(&op)
		}
		now := s.Now()
		op.Step, op.Status, op.Version, op.UpdatedAt = p.ToStep, p.ToStatus, op.Version+1, now
		if !p.KeepStepClock && fromStep != p.ToStep {
			op.StepStartedAt = now
		}
		row := op
		row.TicketID, row.Detail = CleanText(op.TicketID), CleanText(op.Detail)
		if err := x.OperationUpdate(ctx, row); err != nil {
			return fmt.Errorf("updating operation %s: %w", op.ID, err)
		}
		if err := x.BindingSetStatus(ctx, op.SubjectID, op.TargetKey, op.Status, now); err != nil {
			return fmt.Errorf("updating binding: %w", err)
		}
		if ev, err = s.appendEventSteps(ctx, x, op.ID, p.Event, fromStep, op.Step, fromStatus, op.Status); err != nil {
			return err
		}
		out = op
		jobs := p.Jobs
		if p.EventJobsFunc != nil {
			jobs = append(slices.Clip(jobs), p.EventJobsFunc(op, ev)...)
		}
		if fromStep != op.Step {
			more, err := s.noticeRollout(ctx, x, p.Rollout, op, ev)
			if err != nil {
				return err
			}
			jobs = append(slices.Clip(jobs), more...)
		}
		return enqueue(ctx, x, jobs)
	})
	if err != nil {
		return Operation{}, Event{}, fmt.Errorf("moving %s to step %d: %w", p.OperationID, p.ToStep, err)
	}
	return out, ev, nil
}

// checkTransition is ApplyTransition's concurrency check of op and its
// binding b, read under lock: the operation is still at p.ExpectStep
// (ErrStepMismatch), at p.ExpectVersion when it is set (ErrVersionConflict),
// and still owns b (ErrBindingNotOwned: the binding was re-applied).
func checkTransition(p TransitionParams, op Operation, b Binding) error {
	if op.Step != p.ExpectStep {
		return fmt.Errorf("%w: at %d, expected %d", ErrStepMismatch, op.Step, p.ExpectStep)
	}
	if p.ExpectVersion != 0 && op.Version != p.ExpectVersion {
		return fmt.Errorf("%w: at version %d, expected %d", ErrVersionConflict, op.Version, p.ExpectVersion)
	}
	if b.OperationID != op.ID {
		return fmt.Errorf("%w: %s", ErrBindingNotOwned, b.OperationID)
	}
	return nil
}
