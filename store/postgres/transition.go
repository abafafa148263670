package postgres

import (
	"context"
	"errors"
	"fmt"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"

	"github.com/jackc/pgx/v5"
)

// ApplyTransition is the one write of an operation's state (DESIGN §2). In
// one transaction it locks the operation row and then its binding row (fixed
// order), checks that the operation is still at ExpectStep and ExpectVersion
// and still owns its binding, runs Guard, updates the operation (step, status,
// version+1 and the fields Update sets), sets the binding's status, appends
// the event and enqueues Jobs. Errors: ErrNotFound, ErrStepMismatch,
// ErrVersionConflict, ErrBindingNotOwned (all wrapped), or Guard's error; on
// any error nothing is written.
func (s *Store) ApplyTransition(ctx context.Context, p store.TransitionParams) (store.Operation, store.Event, error) {
	var out store.Operation
	var ev store.Event
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		op, err := oneOperation(queries.OperationGetForUpdate(ctx, tx, p.OperationID))
		if err != nil {
			return err
		}
		br, err := queries.BindingGetForUpdate(ctx, tx, &dbsqlc.BindingGetForUpdateParams{SubjectID: op.SubjectID, TargetKey: op.TargetKey})
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrBindingNotOwned
		}
		if err != nil {
			return fmt.Errorf("locking binding: %w", err)
		}
		b := fromBinding(br)
		if op.Step != p.ExpectStep {
			return fmt.Errorf("%w: at %d, expected %d", store.ErrStepMismatch, op.Step, p.ExpectStep)
		}
		if p.ExpectVersion != 0 && op.Version != p.ExpectVersion {
			return fmt.Errorf("%w: at version %d, expected %d", store.ErrVersionConflict, op.Version, p.ExpectVersion)
		}
		if b.OperationID != op.ID {
			return fmt.Errorf("%w: %s", store.ErrBindingNotOwned, b.OperationID)
		}
		if p.Guard != nil {
			if err := p.Guard(ctx, txHandle{tx}, op, b); err != nil {
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
		if err := s.updateOperation(ctx, tx, op); err != nil {
			return err
		}
		if err := queries.BindingSetStatus(ctx, tx, &dbsqlc.BindingSetStatusParams{SubjectID: op.SubjectID,
			TargetKey: op.TargetKey, Status: op.Status, UpdatedAt: now}); err != nil {
			return fmt.Errorf("updating binding: %w", err)
		}
		if ev, err = s.appendEventSteps(ctx, tx, op.ID, p.Event, fromStep, op.Step, fromStatus, op.Status); err != nil {
			return err
		}
		out = op
		return s.enqueue(ctx, tx, p.Jobs)
	})
	if err != nil {
		return store.Operation{}, store.Event{}, fmt.Errorf("moving %s to step %d: %w", p.OperationID, p.ToStep, err)
	}
	return out, ev, nil
}

func (s *Store) updateOperation(ctx context.Context, tx pgx.Tx, op store.Operation) error {
	files, err := marshalFiles(op.Files)
	if err != nil {
		return err
	}
	err = queries.OperationUpdate(ctx, tx, &dbsqlc.OperationUpdateParams{ID: op.ID, ProjectID: op.ProjectID,
		TargetBranch: op.TargetBranch, SourceBranch: op.SourceBranch, Files: files, Step: op.Step, Status: op.Status,
		Version: op.Version, TicketID: store.CleanText(op.TicketID), MrIid: op.MRIID, MrWebUrl: op.MRWebURL,
		HeadSha: op.HeadSHA, PipelineID: op.PipelineID, PipelineUrl: op.PipelineURL, MergeCommitSha: op.MergeCommitSHA,
		Rounds: op.Rounds, Detail: store.CleanText(op.Detail), StepStartedAt: op.StepStartedAt, UpdatedAt: op.UpdatedAt})
	if err != nil {
		return fmt.Errorf("updating operation %s: %w", op.ID, err)
	}
	return nil
}
