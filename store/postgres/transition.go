package postgres

import (
	"context"
	"errors"
	"fmt"

	"changebot/store"

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
		op, err := scanOperation(tx.QueryRow(ctx, `SELECT `+opColumns+` FROM operations WHERE id = $1 FOR UPDATE`, p.OperationID))
		if err != nil {
			return err
		}
		var b store.Binding
		err = tx.QueryRow(ctx, `SELECT subject_id, target_key, operation_id, status, version, updated_at
			FROM bindings WHERE subject_id = $1 AND target_key = $2 FOR UPDATE`, op.SubjectID, op.TargetKey).
			Scan(&b.SubjectID, &b.TargetKey, &b.OperationID, &b.Status, &b.Version, &b.UpdatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrBindingNotOwned
		}
		if err != nil {
			return fmt.Errorf("locking binding: %w", err)
		}
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
		if _, err := tx.Exec(ctx, `UPDATE bindings SET status = $3, version = version + 1, updated_at = $4
			WHERE subject_id = $1 AND target_key = $2`, op.SubjectID, op.TargetKey, op.Status, now); err != nil {
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
	_, err = tx.Exec(ctx, `UPDATE operations SET project_id = $2, target_branch = $3, source_branch = $4,
		files = $5, step = $6, status = $7, version = $8, ticket_id = $9, mr_iid = $10, mr_web_url = $11,
		head_sha = $12, pipeline_id = $13, pipeline_url = $14, merge_commit_sha = $15, rounds = $16,
		detail = $17, step_started_at = $18, updated_at = $19 WHERE id = $1`,
		op.ID, op.ProjectID, op.TargetBranch, op.SourceBranch, files, op.Step, op.Status, op.Version,
		store.CleanText(op.TicketID), op.MRIID, op.MRWebURL, op.HeadSHA, op.PipelineID, op.PipelineURL, op.MergeCommitSHA,
		op.Rounds, store.CleanText(op.Detail), op.StepStartedAt, op.UpdatedAt)
	if err != nil {
		return fmt.Errorf("updating operation %s: %w", op.ID, err)
	}
	return nil
}
