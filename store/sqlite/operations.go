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
	"changebot/store/sqlite/internal/dbsqlc"
	"changebot/store/sqlite/internal/dbtime"
)

// opColumns and scanOperation serve the hand-written query of operations
// over River's jobs (ListStuckOperations); the others are generated
// (internal/dbsqlc).
const opColumns = `id, platform, subject_id, target_key, project, project_id, target_branch, source_branch,
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
	dest := []any{&op.ID, &op.Platform, &op.SubjectID, &op.TargetKey, &op.Project, &op.ProjectID, &op.TargetBranch,
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

// fromRow converts a generated operations row to the store's type.
func fromRow(r dbsqlc.Operations) (store.Operation, error) {
	op := store.Operation{ID: r.ID, Platform: r.Platform, SubjectID: r.SubjectID, TargetKey: r.TargetKey, Project: r.Project,
		ProjectID: r.ProjectID, TargetBranch: r.TargetBranch, SourceBranch: r.SourceBranch, Title: r.Title,
		Description: r.Description, RequestedBy: r.RequestedBy, ApprovalFirst: r.ApprovalFirst, Step: r.Step,
		Status: r.Status, Version: r.Version, TicketID: r.TicketID, MRIID: r.MrIid, MRWebURL: r.MrWebUrl,
		HeadSHA: r.HeadSha, PipelineID: r.PipelineID, PipelineURL: r.PipelineUrl, MergeCommitSHA: r.MergeCommitSha,
		Rounds: r.Rounds, Detail: r.Detail, StepStartedAt: r.StepStartedAt.Time, CreatedAt: r.CreatedAt.Time,
		UpdatedAt: r.UpdatedAt.Time}
	if r.IdempotencyKey != nil {
		op.IdempotencyKey = *r.IdempotencyKey
	}
	if err := json.Unmarshal([]byte(r.Files), &op.Files); err != nil {
		return store.Operation{}, fmt.Errorf("decoding files of %s: %w", op.ID, err)
	}
	return op, nil
}

// oneOperation converts the result of a generated :one query of operations;
// no row is store.ErrNotFound.
func oneOperation(r dbsqlc.Operations, err error) (store.Operation, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return store.Operation{}, store.ErrNotFound
	}
	if err != nil {
		return store.Operation{}, err
	}
	return fromRow(r)
}

// manyOperations converts the result of a generated :many query of
// operations.
func manyOperations(rows []dbsqlc.Operations, err error) ([]store.Operation, error) {
	if err != nil {
		return nil, err
	}
	var out []store.Operation
	for _, r := range rows {
		op, err := fromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, nil
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
	g, err := q(db).gen()
	if err != nil {
		return store.Operation{}, err
	}
	op, err := oneOperation(queries.OperationGet(ctx, g, id))
	if err != nil {
		return store.Operation{}, fmt.Errorf("reading operation %s: %w", id, err)
	}
	return op, nil
}

// OperationExists implements store.Operations.
func (s *Store) OperationExists(ctx context.Context, db store.DBTX, id string) (bool, error) {
	g, err := q(db).gen()
	if err != nil {
		return false, err
	}
	ok, err := queries.OperationExists(ctx, g, id)
	if err != nil {
		return false, fmt.Errorf("checking operation %s: %w", id, err)
	}
	return ok, nil
}

// FindOperationByIdempotencyKey implements store.Operations.
func (s *Store) FindOperationByIdempotencyKey(ctx context.Context, db store.DBTX, key string) (store.Operation, error) {
	g, err := q(db).gen()
	if err != nil {
		return store.Operation{}, err
	}
	op, err := oneOperation(queries.OperationGetByIdempotencyKey(ctx, g, &key))
	if err != nil {
		return store.Operation{}, fmt.Errorf("finding the operation of an idempotency key: %w", err)
	}
	return op, nil
}

// FindOperationByMR implements store.Operations.
func (s *Store) FindOperationByMR(ctx context.Context, db store.DBTX, platform string, projectID, iid int64) (store.Operation, error) {
	g, err := q(db).gen()
	if err != nil {
		return store.Operation{}, err
	}
	op, err := oneOperation(queries.OperationNewestOfMR(ctx, g, &dbsqlc.OperationNewestOfMRParams{Platform: store.PlatformOr(platform), ProjectID: projectID, MrIid: iid}))
	if err != nil {
		return store.Operation{}, fmt.Errorf("finding operation of %s !%d in project %d: %w", store.PlatformOr(platform), iid, projectID, err)
	}
	return op, nil
}

// ListOperationsByStatus implements store.Operations.
func (s *Store) ListOperationsByStatus(ctx context.Context, db store.DBTX, statuses []string, from, to time.Time, limit int) ([]store.Operation, error) {
	// Hand-written: sqlc v1.31.1 numbers the parameters after an
	// sqlc.slice list (?2, ?3) as if the list were one value, so with two
	// or more statuses the time bounds read a status (as in ListWatchedMRs).
	list, args := in(statuses)
	args = append(args, dbtime.Of(from), dbtime.Of(to), limit)
	ops, err := collectOperations(q(db).Query(ctx, `SELECT `+opColumns+` FROM operations
		WHERE status IN (`+list+`) AND updated_at >= ? AND updated_at < ?
		ORDER BY updated_at LIMIT ?`, args...))
	if err != nil {
		return nil, fmt.Errorf("listing operations by status: %w", err)
	}
	return ops, nil
}

// ListMergedByProject implements store.Operations.
func (s *Store) ListMergedByProject(ctx context.Context, db store.DBTX, platform string, projectID int64, limit int) ([]store.Operation, error) {
	g, err := q(db).gen()
	if err != nil {
		return nil, err
	}
	ops, err := manyOperations(queries.OperationListMergedByProject(ctx, g, &dbsqlc.OperationListMergedByProjectParams{
		Platform: store.PlatformOr(platform), ProjectID: projectID, Status: store.StatusMerged, Max: int64(limit)}))
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
	g, err := q(db).gen()
	if err != nil {
		return nil, err
	}
	rows, err := queries.OperationCountByStatus(ctx, g, statuses)
	if err != nil {
		return nil, fmt.Errorf("counting operations by status: %w", err)
	}
	byStatus := map[string]store.StatusAge{}
	for _, r := range rows {
		// min(updated_at) has no column type for sqlc: it comes as the
		// stored text, read as dbtime.Time reads its column.
		var oldest dbtime.Time
		if err := oldest.Scan(r.OldestUpdatedAt); err != nil {
			return nil, fmt.Errorf("counting operations by status: %w", err)
		}
		byStatus[r.Status] = store.StatusAge{Status: r.Status, Count: int(r.N), OldestUpdatedAt: oldest.Time}
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
		if op.IdempotencyKey != "" {
			existing, err := oneOperation(queries.OperationGetByIdempotencyKey(ctx, tx, &op.IdempotencyKey))
			if err == nil {
				op, created = existing, false
				return nil
			}
			if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		var idem *string
		if op.IdempotencyKey != "" {
			idem = &op.IdempotencyKey
		}
		err := queries.OperationInsert(ctx, tx, &dbsqlc.OperationInsertParams{ID: op.ID, Platform: store.PlatformOr(op.Platform), SubjectID: op.SubjectID,
			TargetKey: op.TargetKey, Project: op.Project, ProjectID: op.ProjectID, TargetBranch: op.TargetBranch,
			SourceBranch: op.SourceBranch, Title: op.Title, Description: op.Description, Files: string(files),
			RequestedBy: op.RequestedBy, ApprovalFirst: op.ApprovalFirst, Step: op.Step, Status: op.Status,
			IdempotencyKey: idem, StepStartedAt: dbtime.Of(now), CreatedAt: dbtime.Of(now), UpdatedAt: dbtime.Of(now)})
		if err != nil {
			if isUnique(err) && op.IdempotencyKey != "" {
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
func (s *Store) takeBinding(ctx context.Context, tx *sql.Tx, op store.Operation, now time.Time) error {
	n, err := queries.BindingInsertIfAbsent(ctx, tx, &dbsqlc.BindingInsertIfAbsentParams{SubjectID: op.SubjectID,
		TargetKey: op.TargetKey, OperationID: op.ID, Status: op.Status, UpdatedAt: dbtime.Of(now)})
	if err != nil {
		return fmt.Errorf("taking binding: %w", err)
	}
	if n == 1 {
		return nil
	}
	b, err := queries.BindingGet(ctx, tx, &dbsqlc.BindingGetParams{SubjectID: op.SubjectID, TargetKey: op.TargetKey})
	if err != nil {
		return fmt.Errorf("reading binding: %w", err)
	}
	if !store.IsReappliable(b.Status) {
		return &store.ActiveChangeError{OperationID: b.OperationID, Status: b.Status}
	}
	if err := queries.BindingReset(ctx, tx, &dbsqlc.BindingResetParams{SubjectID: op.SubjectID, TargetKey: op.TargetKey,
		OperationID: op.ID, Status: op.Status, UpdatedAt: dbtime.Of(now)}); err != nil {
		return fmt.Errorf("resetting binding: %w", err)
	}
	return nil
}

// GetBinding implements store.Operations.
func (s *Store) GetBinding(ctx context.Context, db store.DBTX, subjectID, targetKey string) (store.Binding, error) {
	g, err := q(db).gen()
	if err != nil {
		return store.Binding{}, err
	}
	r, err := queries.BindingGet(ctx, g, &dbsqlc.BindingGetParams{SubjectID: subjectID, TargetKey: targetKey})
	if errors.Is(err, sql.ErrNoRows) {
		return store.Binding{}, fmt.Errorf("reading binding %s/%s: %w", subjectID, targetKey, store.ErrNotFound)
	}
	if err != nil {
		return store.Binding{}, fmt.Errorf("reading binding %s/%s: %w", subjectID, targetKey, err)
	}
	return fromBinding(r), nil
}

// fromBinding converts a generated bindings row to the store's type.
func fromBinding(r dbsqlc.Bindings) store.Binding {
	return store.Binding{SubjectID: r.SubjectID, TargetKey: r.TargetKey, OperationID: r.OperationID,
		Status: r.Status, Version: r.Version, UpdatedAt: r.UpdatedAt.Time}
}

// ListOperationIDs implements store.Operations.
func (s *Store) ListOperationIDs(ctx context.Context, db store.DBTX, after string, limit int) ([]string, error) {
	g, err := q(db).gen()
	if err != nil {
		return nil, err
	}
	ids, err := queries.OperationListIDs(ctx, g, &dbsqlc.OperationListIDsParams{After: after, Max: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("listing operation ids: %w", err)
	}
	return ids, nil
}

// ApplyTransition implements store.Operations (see the PostgreSQL
// implementation's doc); the write lock of the transaction stands for the
// row locks.
func (s *Store) ApplyTransition(ctx context.Context, p store.TransitionParams) (store.Operation, store.Event, error) {
	var out store.Operation
	var ev store.Event
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		op, err := oneOperation(queries.OperationGet(ctx, tx, p.OperationID))
		if err != nil {
			return err
		}
		br, err := queries.BindingGet(ctx, tx, &dbsqlc.BindingGetParams{SubjectID: op.SubjectID, TargetKey: op.TargetKey})
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrBindingNotOwned
		}
		if err != nil {
			return fmt.Errorf("reading binding: %w", err)
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
		if err := updateOperation(ctx, tx, op); err != nil {
			return err
		}
		if err := queries.BindingSetStatus(ctx, tx, &dbsqlc.BindingSetStatusParams{SubjectID: op.SubjectID,
			TargetKey: op.TargetKey, Status: op.Status, UpdatedAt: dbtime.Of(now)}); err != nil {
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

func updateOperation(ctx context.Context, tx *sql.Tx, op store.Operation) error {
	files, err := marshalFiles(op.Files)
	if err != nil {
		return err
	}
	err = queries.OperationUpdate(ctx, tx, &dbsqlc.OperationUpdateParams{ID: op.ID, ProjectID: op.ProjectID,
		TargetBranch: op.TargetBranch, SourceBranch: op.SourceBranch, Files: string(files), Step: op.Step, Status: op.Status,
		Version: op.Version, TicketID: store.CleanText(op.TicketID), MrIid: op.MRIID, MrWebUrl: op.MRWebURL,
		HeadSha: op.HeadSHA, PipelineID: op.PipelineID, PipelineUrl: op.PipelineURL, MergeCommitSha: op.MergeCommitSHA,
		Rounds: op.Rounds, Detail: store.CleanText(op.Detail), StepStartedAt: dbtime.Of(op.StepStartedAt),
		UpdatedAt: dbtime.Of(op.UpdatedAt)})
	if err != nil {
		return fmt.Errorf("updating operation %s: %w", op.ID, err)
	}
	return nil
}
