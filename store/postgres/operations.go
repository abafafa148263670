package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"changebot/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const opColumns = `id, subject_id, target_key, project, project_id, target_branch, source_branch,
	title, description, files, requested_by, approval_first, step, status, version, ticket_id,
	mr_iid, mr_web_url, head_sha, pipeline_id, pipeline_url, merge_commit_sha, rounds, detail,
	coalesce(idempotency_key, ''), step_started_at, created_at, updated_at`

func scanOperation(row pgx.Row) (store.Operation, error) {
	var op store.Operation
	var files []byte
	err := row.Scan(&op.ID, &op.SubjectID, &op.TargetKey, &op.Project, &op.ProjectID, &op.TargetBranch,
		&op.SourceBranch, &op.Title, &op.Description, &files, &op.RequestedBy, &op.ApprovalFirst,
		&op.Step, &op.Status, &op.Version, &op.TicketID, &op.MRIID, &op.MRWebURL, &op.HeadSHA,
		&op.PipelineID, &op.PipelineURL, &op.MergeCommitSHA, &op.Rounds, &op.Detail,
		&op.IdempotencyKey, &op.StepStartedAt, &op.CreatedAt, &op.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Operation{}, store.ErrNotFound
	}
	if err != nil {
		return store.Operation{}, err
	}
	if err := json.Unmarshal(files, &op.Files); err != nil {
		return store.Operation{}, fmt.Errorf("decoding files of %s: %w", op.ID, err)
	}
	op.StepStartedAt = op.StepStartedAt.UTC()
	op.CreatedAt = op.CreatedAt.UTC()
	op.UpdatedAt = op.UpdatedAt.UTC()
	return op, nil
}

func collectOperations(rows pgx.Rows, err error) ([]store.Operation, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Operation
	for rows.Next() {
		op, err := scanOperation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, rows.Err()
}

// GetOperation reads one operation; ErrNotFound when there is none.
func (s *Store) GetOperation(ctx context.Context, db store.DBTX, id string) (store.Operation, error) {
	op, err := scanOperation(q(db).QueryRow(ctx, `SELECT `+opColumns+` FROM operations WHERE id = $1`, id))
	if err != nil {
		return store.Operation{}, fmt.Errorf("reading operation %s: %w", id, err)
	}
	return op, nil
}

// OperationExists reports whether an operation row with id exists (the
// create step's insert-or-advance question, DESIGN §3 step 4).
func (s *Store) OperationExists(ctx context.Context, db store.DBTX, id string) (bool, error) {
	var ok bool
	err := q(db).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM operations WHERE id = $1)`, id).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("checking operation %s: %w", id, err)
	}
	return ok, nil
}

// FindOperationByIdempotencyKey returns the operation submitted with
// idempotency key key; ErrNotFound when none was.
func (s *Store) FindOperationByIdempotencyKey(ctx context.Context, db store.DBTX, key string) (store.Operation, error) {
	op, err := scanOperation(q(db).QueryRow(ctx, `SELECT `+opColumns+` FROM operations WHERE idempotency_key = $1`, key))
	if err != nil {
		return store.Operation{}, fmt.Errorf("finding the operation of an idempotency key: %w", err)
	}
	return op, nil
}

// FindOperationByMR returns the newest operation that opened merge request
// iid in project projectID; ErrNotFound when none did.
func (s *Store) FindOperationByMR(ctx context.Context, db store.DBTX, projectID, iid int64) (store.Operation, error) {
	op, err := scanOperation(q(db).QueryRow(ctx, `SELECT `+opColumns+` FROM operations
		WHERE project_id = $1 AND mr_iid = $2 ORDER BY created_at DESC LIMIT 1`, projectID, iid))
	if err != nil {
		return store.Operation{}, fmt.Errorf("finding operation of !%d in project %d: %w", iid, projectID, err)
	}
	return op, nil
}

// ListOperationsByStatus returns up to limit operations in one of statuses
// whose updated_at lies in [from, to), oldest first. One query.
func (s *Store) ListOperationsByStatus(ctx context.Context, db store.DBTX, statuses []string, from, to any, limit int) ([]store.Operation, error) {
	ops, err := collectOperations(q(db).Query(ctx, `SELECT `+opColumns+` FROM operations
		WHERE status = ANY($1) AND updated_at >= $2 AND updated_at < $3
		ORDER BY updated_at LIMIT $4`, statuses, from, to, limit))
	if err != nil {
		return nil, fmt.Errorf("listing operations by status: %w", err)
	}
	return ops, nil
}

// ListMergedByProject returns MERGED operations of projectID whose merge
// commit is set, oldest first. One query.
func (s *Store) ListMergedByProject(ctx context.Context, db store.DBTX, projectID int64, limit int) ([]store.Operation, error) {
	ops, err := collectOperations(q(db).Query(ctx, `SELECT `+opColumns+` FROM operations
		WHERE project_id = $1 AND status = $2 AND merge_commit_sha <> ''
		ORDER BY updated_at LIMIT $3`, projectID, store.StatusMerged, limit))
	if err != nil {
		return nil, fmt.Errorf("listing merged operations of project %d: %w", projectID, err)
	}
	return ops, nil
}

// CountActive counts operations that hold their binding: every status but
// the reappliable ones (see Reappliable). Used for admission control. One
// query over the active statuses' index ranges (CountByStatusWithAge), so
// its cost does not grow with the number of finished changes.
func (s *Store) CountActive(ctx context.Context, db store.DBTX) (int, error) {
	counts, err := s.CountByStatusWithAge(ctx, db, store.ActiveStatuses())
	if err != nil {
		return 0, fmt.Errorf("counting active operations: %w", err)
	}
	n := 0
	for _, c := range counts {
		n += c.Count
	}
	return n, nil
}

// CreateOperation inserts the operation, takes its binding, appends the
// first event and enqueues jobs, in one transaction. The binding is taken by
// inserting its row, or, when a row exists, by resetting it in place with the
// new operation id if its status is reappliable (IsReappliable: the old
// operation's late transitions then find no owner, ErrBindingNotOwned).
// Concurrent first changes for a binding that has no row yet are decided by
// the row's primary key: the insert of one waits for the other's
// transaction, then finds its row. With an IdempotencyKey already used it
// returns the existing operation and created=false. An *ActiveChangeError
// (errors.Is ErrActiveChange) when the binding's operation holds it; then
// nothing is written.
func (s *Store) CreateOperation(ctx context.Context, p store.CreateParams) (op store.Operation, created bool, err error) {
	op = p.Operation
	now := s.Now()
	op.Version, op.CreatedAt, op.UpdatedAt, op.StepStartedAt = 1, now, now, now
	files, err := marshalFiles(op.Files)
	if err != nil {
		return store.Operation{}, false, fmt.Errorf("encoding files: %w", err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if op.IdempotencyKey != "" {
			existing, err := scanOperation(tx.QueryRow(ctx, `SELECT `+opColumns+` FROM operations WHERE idempotency_key = $1`, op.IdempotencyKey))
			if err == nil {
				op, created = existing, false
				return nil
			}
			if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		var idem any
		if op.IdempotencyKey != "" {
			idem = op.IdempotencyKey
		}
		_, err := tx.Exec(ctx, `INSERT INTO operations (id, subject_id, target_key, project, project_id,
			target_branch, source_branch, title, description, files, requested_by, approval_first,
			step, status, version, idempotency_key, step_started_at, created_at, updated_at)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,1,$15,$16,$16,$16)`,
			op.ID, op.SubjectID, op.TargetKey, op.Project, op.ProjectID, op.TargetBranch, op.SourceBranch,
			op.Title, op.Description, files, op.RequestedBy, op.ApprovalFirst, op.Step, op.Status, idem, now)
		if err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "23505" && op.IdempotencyKey != "" {
				return store.ErrDuplicate
			}
			return fmt.Errorf("inserting operation: %w", err)
		}
		if err := s.takeBinding(ctx, tx, op, now); err != nil {
			return err
		}
		if _, err := s.appendEventSteps(ctx, tx, op.ID, p.Event, 0, op.Step, "", op.Status); err != nil {
			return err
		}
		created = true
		return s.enqueue(ctx, tx, p.Jobs)
	})
	if errors.Is(err, store.ErrDuplicate) {
		// A concurrent request with the same idempotency key won the insert.
		existing, gerr := scanOperation(s.pool.QueryRow(ctx, `SELECT `+opColumns+` FROM operations WHERE idempotency_key = $1`, op.IdempotencyKey))
		if gerr != nil {
			return store.Operation{}, false, fmt.Errorf("reading operation of idempotency key: %w", gerr)
		}
		return existing, false, nil
	}
	if err != nil {
		return store.Operation{}, false, fmt.Errorf("creating operation for %s/%s: %w", op.SubjectID, op.TargetKey, err)
	}
	return op, created, nil
}

// takeBinding makes op (already inserted in tx) the owner of its binding.
// The insert takes a binding that has no row; on a conflict it waits for a
// concurrent inserter's transaction, so the row locked next is the
// committed one. SELECT ... FOR UPDATE alone locks nothing when no row
// exists yet (issue 9, defect 2).
func (s *Store) takeBinding(ctx context.Context, tx pgx.Tx, op store.Operation, now time.Time) error {
	tag, err := tx.Exec(ctx, `INSERT INTO bindings (subject_id, target_key, operation_id, status, version, updated_at)
		VALUES ($1, $2, $3, $4, 1, $5) ON CONFLICT (subject_id, target_key) DO NOTHING`,
		op.SubjectID, op.TargetKey, op.ID, op.Status, now)
	if err != nil {
		return fmt.Errorf("taking binding: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var holder, status string
	err = tx.QueryRow(ctx, `SELECT operation_id, status FROM bindings WHERE subject_id = $1 AND target_key = $2 FOR UPDATE`,
		op.SubjectID, op.TargetKey).Scan(&holder, &status)
	if err != nil {
		// The row existed at the insert and bindings are never deleted.
		return fmt.Errorf("locking binding: %w", err)
	}
	if !store.IsReappliable(status) {
		return &store.ActiveChangeError{OperationID: holder, Status: status}
	}
	_, err = tx.Exec(ctx, `UPDATE bindings SET operation_id = $3, status = $4, version = version + 1, updated_at = $5
		WHERE subject_id = $1 AND target_key = $2`, op.SubjectID, op.TargetKey, op.ID, op.Status, now)
	if err != nil {
		return fmt.Errorf("resetting binding: %w", err)
	}
	return nil
}

// GetBinding reads a binding; ErrNotFound when there is none.
func (s *Store) GetBinding(ctx context.Context, db store.DBTX, subjectID, targetKey string) (store.Binding, error) {
	var b store.Binding
	err := q(db).QueryRow(ctx, `SELECT subject_id, target_key, operation_id, status, version, updated_at
		FROM bindings WHERE subject_id = $1 AND target_key = $2`, subjectID, targetKey).
		Scan(&b.SubjectID, &b.TargetKey, &b.OperationID, &b.Status, &b.Version, &b.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Binding{}, fmt.Errorf("reading binding %s/%s: %w", subjectID, targetKey, store.ErrNotFound)
	}
	if err != nil {
		return store.Binding{}, fmt.Errorf("reading binding %s/%s: %w", subjectID, targetKey, err)
	}
	b.UpdatedAt = b.UpdatedAt.UTC()
	return b, nil
}

// ListOperationIDs returns up to limit operation ids greater than after, in
// order (for paging through every operation).
func (s *Store) ListOperationIDs(ctx context.Context, db store.DBTX, after string, limit int) ([]string, error) {
	rows, err := q(db).Query(ctx, `SELECT id FROM operations WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing operation ids: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
