package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"changebot/store"
)

const opColumns = `id, subject_id, target_key, project, project_id, target_branch, source_branch,
	title, description, files, requested_by, approval_first, step, status, version, ticket_id,
	mr_iid, mr_web_url, head_sha, pipeline_id, pipeline_url, merge_commit_sha, rounds, detail,
	coalesce(idempotency_key, ''), step_started_at, created_at, updated_at`

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

func scanOperation(r row, extra ...any) (store.Operation, error) {
	var op store.Operation
	var files []byte
	dest := []any{&op.ID, &op.SubjectID, &op.TargetKey, &op.Project, &op.ProjectID, &op.TargetBranch,
		&op.SourceBranch, &op.Title, &op.Description, &files, &op.RequestedBy, &op.ApprovalFirst,
		&op.Step, &op.Status, &op.Version, &op.TicketID, &op.MRIID, &op.MRWebURL, &op.HeadSHA,
		&op.PipelineID, &op.PipelineURL, &op.MergeCommitSHA, &op.Rounds, &op.Detail,
		&op.IdempotencyKey, tm{&op.StepStartedAt}, tm{&op.CreatedAt}, tm{&op.UpdatedAt}}
	err := r.Scan(append(dest, extra...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Operation{}, store.ErrNotFound
	}
	if err != nil {
		return store.Operation{}, err
	}
	if err := json.Unmarshal(files, &op.Files); err != nil {
		return store.Operation{}, fmt.Errorf("decoding files of %s: %w", op.ID, err)
	}
	return op, nil
}

func collectOperations(rows *sql.Rows, err error) ([]store.Operation, error) {
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

// GetOperation implements store.Operations.
func (s *Store) GetOperation(ctx context.Context, db store.DBTX, id string) (store.Operation, error) {
	op, err := scanOperation(q(db).QueryRow(ctx, `SELECT `+opColumns+` FROM operations WHERE id = ?`, id))
	if err != nil {
		return store.Operation{}, fmt.Errorf("reading operation %s: %w", id, err)
	}
	return op, nil
}

// OperationExists implements store.Operations.
func (s *Store) OperationExists(ctx context.Context, db store.DBTX, id string) (bool, error) {
	var ok bool
	if err := q(db).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM operations WHERE id = ?)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("checking operation %s: %w", id, err)
	}
	return ok, nil
}

// FindOperationByIdempotencyKey implements store.Operations.
func (s *Store) FindOperationByIdempotencyKey(ctx context.Context, db store.DBTX, key string) (store.Operation, error) {
	op, err := scanOperation(q(db).QueryRow(ctx, `SELECT `+opColumns+` FROM operations WHERE idempotency_key = ?`, key))
	if err != nil {
		return store.Operation{}, fmt.Errorf("finding the operation of an idempotency key: %w", err)
	}
	return op, nil
}

// FindOperationByMR implements store.Operations.
func (s *Store) FindOperationByMR(ctx context.Context, db store.DBTX, projectID, iid int64) (store.Operation, error) {
	op, err := scanOperation(q(db).QueryRow(ctx, `SELECT `+opColumns+` FROM operations
		WHERE project_id = ? AND mr_iid = ? ORDER BY created_at DESC LIMIT 1`, projectID, iid))
	if err != nil {
		return store.Operation{}, fmt.Errorf("finding operation of !%d in project %d: %w", iid, projectID, err)
	}
	return op, nil
}

// ListOperationsByStatus implements store.Operations.
func (s *Store) ListOperationsByStatus(ctx context.Context, db store.DBTX, statuses []string, from, to any, limit int) ([]store.Operation, error) {
	ph, args := in(statuses)
	ops, err := collectOperations(q(db).Query(ctx, `SELECT `+opColumns+` FROM operations
		WHERE status IN (`+ph+`) AND updated_at >= ? AND updated_at < ?
		ORDER BY updated_at LIMIT ?`, append(args, from, to, limit)...))
	if err != nil {
		return nil, fmt.Errorf("listing operations by status: %w", err)
	}
	return ops, nil
}

// ListMergedByProject implements store.Operations.
func (s *Store) ListMergedByProject(ctx context.Context, db store.DBTX, projectID int64, limit int) ([]store.Operation, error) {
	ops, err := collectOperations(q(db).Query(ctx, `SELECT `+opColumns+` FROM operations
		WHERE project_id = ? AND status = ? AND merge_commit_sha <> ''
		ORDER BY updated_at LIMIT ?`, projectID, store.StatusMerged, limit))
	if err != nil {
		return nil, fmt.Errorf("listing merged operations of project %d: %w", projectID, err)
	}
	return ops, nil
}

// CountActive implements store.Operations.
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

// CountByStatusWithAge implements store.Operations.
func (s *Store) CountByStatusWithAge(ctx context.Context, db store.DBTX, statuses []string) ([]store.StatusAge, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	ph, args := in(statuses)
	rows, err := q(db).Query(ctx, `SELECT status, count(*), min(updated_at) FROM operations
		WHERE status IN (`+ph+`) GROUP BY status`, args...)
	if err != nil {
		return nil, fmt.Errorf("counting operations by status: %w", err)
	}
	defer rows.Close()
	byStatus := map[string]store.StatusAge{}
	for rows.Next() {
		var a store.StatusAge
		if err := rows.Scan(&a.Status, &a.Count, tm{&a.OldestUpdatedAt}); err != nil {
			return nil, fmt.Errorf("counting operations by status: %w", err)
		}
		byStatus[a.Status] = a
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting operations by status: %w", err)
	}
	out := make([]store.StatusAge, len(statuses))
	for i, st := range statuses {
		out[i] = byStatus[st]
		out[i].Status = st
	}
	return out, nil
}

// CreateOperation implements store.Operations. The transaction holds the
// database's write lock from its start (BEGIN IMMEDIATE), so concurrent
// first changes of a binding are serialised: the second finds the first's
// row.
func (s *Store) CreateOperation(ctx context.Context, p store.CreateParams) (op store.Operation, created bool, err error) {
	op = p.Operation
	now := s.Now()
	op.Version, op.CreatedAt, op.UpdatedAt, op.StepStartedAt = 1, now, now, now
	files, err := marshalFiles(op.Files)
	if err != nil {
		return store.Operation{}, false, fmt.Errorf("encoding files: %w", err)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		c := conn{ex: tx}
		if op.IdempotencyKey != "" {
			existing, err := scanOperation(c.QueryRow(ctx, `SELECT `+opColumns+` FROM operations WHERE idempotency_key = ?`, op.IdempotencyKey))
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
		_, err := c.Exec(ctx, `INSERT INTO operations (id, subject_id, target_key, project, project_id,
			target_branch, source_branch, title, description, files, requested_by, approval_first,
			step, status, version, idempotency_key, step_started_at, created_at, updated_at)
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,1,?,?,?,?)`,
			op.ID, op.SubjectID, op.TargetKey, op.Project, op.ProjectID, op.TargetBranch, op.SourceBranch,
			op.Title, op.Description, string(files), op.RequestedBy, op.ApprovalFirst, op.Step, op.Status, idem, now, now, now)
		if err != nil {
			if isUnique(err) && op.IdempotencyKey != "" {
				return store.ErrDuplicate
			}
			return fmt.Errorf("inserting operation: %w", err)
		}
		if err := s.takeBinding(ctx, c, op, now); err != nil {
			return err
		}
		if _, err := s.appendEventSteps(ctx, c, op.ID, p.Event, 0, op.Step, "", op.Status); err != nil {
			return err
		}
		created = true
		return s.enqueue(ctx, tx, p.Jobs)
	})
	if errors.Is(err, store.ErrDuplicate) {
		existing, gerr := s.FindOperationByIdempotencyKey(ctx, s.DB(), op.IdempotencyKey)
		if gerr != nil {
			return store.Operation{}, false, gerr
		}
		return existing, false, nil
	}
	if err != nil {
		return store.Operation{}, false, fmt.Errorf("creating operation for %s/%s: %w", op.SubjectID, op.TargetKey, err)
	}
	return op, created, nil
}

// takeBinding makes op (inserted in the transaction of c) the owner of its
// binding: a new row, or the row reset in place when its operation is
// reappliable.
func (s *Store) takeBinding(ctx context.Context, c conn, op store.Operation, now time.Time) error {
	res, err := c.Exec(ctx, `INSERT INTO bindings (subject_id, target_key, operation_id, status, version, updated_at)
		VALUES (?, ?, ?, ?, 1, ?) ON CONFLICT (subject_id, target_key) DO NOTHING`,
		op.SubjectID, op.TargetKey, op.ID, op.Status, now)
	if err != nil {
		return fmt.Errorf("taking binding: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var holder, status string
	if err := c.QueryRow(ctx, `SELECT operation_id, status FROM bindings WHERE subject_id = ? AND target_key = ?`,
		op.SubjectID, op.TargetKey).Scan(&holder, &status); err != nil {
		return fmt.Errorf("reading binding: %w", err)
	}
	if !store.IsReappliable(status) {
		return &store.ActiveChangeError{OperationID: holder, Status: status}
	}
	if _, err := c.Exec(ctx, `UPDATE bindings SET operation_id = ?, status = ?, version = version + 1, updated_at = ?
		WHERE subject_id = ? AND target_key = ?`, op.ID, op.Status, now, op.SubjectID, op.TargetKey); err != nil {
		return fmt.Errorf("resetting binding: %w", err)
	}
	return nil
}

// GetBinding implements store.Operations.
func (s *Store) GetBinding(ctx context.Context, db store.DBTX, subjectID, targetKey string) (store.Binding, error) {
	var b store.Binding
	err := q(db).QueryRow(ctx, `SELECT subject_id, target_key, operation_id, status, version, updated_at
		FROM bindings WHERE subject_id = ? AND target_key = ?`, subjectID, targetKey).
		Scan(&b.SubjectID, &b.TargetKey, &b.OperationID, &b.Status, &b.Version, tm{&b.UpdatedAt})
	if errors.Is(err, sql.ErrNoRows) {
		return store.Binding{}, fmt.Errorf("reading binding %s/%s: %w", subjectID, targetKey, store.ErrNotFound)
	}
	if err != nil {
		return store.Binding{}, fmt.Errorf("reading binding %s/%s: %w", subjectID, targetKey, err)
	}
	return b, nil
}

// ListOperationIDs implements store.Operations.
func (s *Store) ListOperationIDs(ctx context.Context, db store.DBTX, after string, limit int) ([]string, error) {
	rows, err := q(db).Query(ctx, `SELECT id FROM operations WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
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

// ApplyTransition implements store.Operations (see the PostgreSQL
// implementation's doc); the write lock of the transaction stands for the
// row locks.
func (s *Store) ApplyTransition(ctx context.Context, p store.TransitionParams) (store.Operation, store.Event, error) {
	var out store.Operation
	var ev store.Event
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		c := conn{ex: tx}
		op, err := scanOperation(c.QueryRow(ctx, `SELECT `+opColumns+` FROM operations WHERE id = ?`, p.OperationID))
		if err != nil {
			return err
		}
		var b store.Binding
		err = c.QueryRow(ctx, `SELECT subject_id, target_key, operation_id, status, version, updated_at
			FROM bindings WHERE subject_id = ? AND target_key = ?`, op.SubjectID, op.TargetKey).
			Scan(&b.SubjectID, &b.TargetKey, &b.OperationID, &b.Status, &b.Version, tm{&b.UpdatedAt})
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrBindingNotOwned
		}
		if err != nil {
			return fmt.Errorf("reading binding: %w", err)
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
		if err := updateOperation(ctx, c, op); err != nil {
			return err
		}
		if _, err := c.Exec(ctx, `UPDATE bindings SET status = ?, version = version + 1, updated_at = ?
			WHERE subject_id = ? AND target_key = ?`, op.Status, now, op.SubjectID, op.TargetKey); err != nil {
			return fmt.Errorf("updating binding: %w", err)
		}
		if ev, err = s.appendEventSteps(ctx, c, op.ID, p.Event, fromStep, op.Step, fromStatus, op.Status); err != nil {
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

func updateOperation(ctx context.Context, c conn, op store.Operation) error {
	files, err := marshalFiles(op.Files)
	if err != nil {
		return err
	}
	_, err = c.Exec(ctx, `UPDATE operations SET project_id = ?, target_branch = ?, source_branch = ?,
		files = ?, step = ?, status = ?, version = ?, ticket_id = ?, mr_iid = ?, mr_web_url = ?,
		head_sha = ?, pipeline_id = ?, pipeline_url = ?, merge_commit_sha = ?, rounds = ?,
		detail = ?, step_started_at = ?, updated_at = ? WHERE id = ?`,
		op.ProjectID, op.TargetBranch, op.SourceBranch, string(files), op.Step, op.Status, op.Version,
		store.CleanText(op.TicketID), op.MRIID, op.MRWebURL, op.HeadSHA, op.PipelineID, op.PipelineURL, op.MergeCommitSHA,
		op.Rounds, store.CleanText(op.Detail), op.StepStartedAt, op.UpdatedAt, op.ID)
	if err != nil {
		return fmt.Errorf("updating operation %s: %w", op.ID, err)
	}
	return nil
}
