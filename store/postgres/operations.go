package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// opColumns and scanOperation serve the hand-written query of operations
// over River's jobs (ListStuckOperations); the others are generated
// (internal/dbsqlc).
const opColumns = `id, platform, subject_id, target_key, project, project_id, target_branch, source_branch,
	title, description, files, requested_by, approval_first, step, status, version, ticket_id,
	mr_iid, mr_web_url, head_sha, pipeline_id, pipeline_url, merge_commit_sha, rounds, detail,
	coalesce(idempotency_key, ''), step_started_at, created_at, updated_at`

func scanOperation(row pgx.Row) (store.Operation, error) {
	var op store.Operation
	var files []byte
	err := row.Scan(&op.ID, &op.Platform, &op.SubjectID, &op.TargetKey, &op.Project, &op.ProjectID, &op.TargetBranch,
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

// fromRow converts a generated operations row to the store's type.
func fromRow(r dbsqlc.Operations) (store.Operation, error) {
	op := store.Operation{ID: r.ID, Platform: r.Platform, SubjectID: r.SubjectID, TargetKey: r.TargetKey, Project: r.Project,
		ProjectID: r.ProjectID, TargetBranch: r.TargetBranch, SourceBranch: r.SourceBranch, Title: r.Title,
		Description: r.Description, RequestedBy: r.RequestedBy, ApprovalFirst: r.ApprovalFirst, Step: r.Step,
		Status: r.Status, Version: r.Version, TicketID: r.TicketID, MRIID: r.MrIid, MRWebURL: r.MrWebUrl,
		HeadSHA: r.HeadSha, PipelineID: r.PipelineID, PipelineURL: r.PipelineUrl, MergeCommitSHA: r.MergeCommitSha,
		Rounds: r.Rounds, Detail: r.Detail, StepStartedAt: r.StepStartedAt.UTC(), CreatedAt: r.CreatedAt.UTC(),
		UpdatedAt: r.UpdatedAt.UTC()}
	if r.IdempotencyKey != nil {
		op.IdempotencyKey = *r.IdempotencyKey
	}
	if err := json.Unmarshal(r.Files, &op.Files); err != nil {
		return store.Operation{}, fmt.Errorf("decoding files of %s: %w", op.ID, err)
	}
	return op, nil
}

// oneOperation converts the result of a generated :one query of operations;
// no row is store.ErrNotFound.
func oneOperation(r dbsqlc.Operations, err error) (store.Operation, error) {
	if errors.Is(err, pgx.ErrNoRows) {
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
	op, err := oneOperation(queries.OperationGet(ctx, q(db), id))
	if err != nil {
		return store.Operation{}, fmt.Errorf("reading operation %s: %w", id, err)
	}
	return op, nil
}

// OperationExists reports whether an operation row with id exists (the
// create step's insert-or-advance question, DESIGN §3 step 4).
func (s *Store) OperationExists(ctx context.Context, db store.DBTX, id string) (bool, error) {
	ok, err := queries.OperationExists(ctx, q(db), id)
	if err != nil {
		return false, fmt.Errorf("checking operation %s: %w", id, err)
	}
	return ok, nil
}

// FindOperationByIdempotencyKey returns the operation submitted with
// idempotency key key; ErrNotFound when none was.
func (s *Store) FindOperationByIdempotencyKey(ctx context.Context, db store.DBTX, key string) (store.Operation, error) {
	op, err := oneOperation(queries.OperationGetByIdempotencyKey(ctx, q(db), &key))
	if err != nil {
		return store.Operation{}, fmt.Errorf("finding the operation of an idempotency key: %w", err)
	}
	return op, nil
}

// FindOperationByMR returns the newest operation that opened merge request
// iid in project projectID; ErrNotFound when none did.
func (s *Store) FindOperationByMR(ctx context.Context, db store.DBTX, platform string, projectID, iid int64) (store.Operation, error) {
	op, err := oneOperation(queries.OperationNewestOfMR(ctx, q(db), &dbsqlc.OperationNewestOfMRParams{Platform: store.PlatformOr(platform), ProjectID: projectID, MrIid: iid}))
	if err != nil {
		return store.Operation{}, fmt.Errorf("finding operation of %s !%d in project %d: %w", store.PlatformOr(platform), iid, projectID, err)
	}
	return op, nil
}

// ListOperationsByStatus returns up to limit operations in one of statuses
// whose updated_at lies in [from, to), oldest first. One query.
func (s *Store) ListOperationsByStatus(ctx context.Context, db store.DBTX, statuses []string, from, to time.Time, limit int) ([]store.Operation, error) {
	ops, err := manyOperations(queries.OperationListByStatus(ctx, q(db), &dbsqlc.OperationListByStatusParams{
		Statuses: statuses, UpdatedFrom: from, UpdatedTo: to, Max: int32(min(limit, math.MaxInt32))}))
	if err != nil {
		return nil, fmt.Errorf("listing operations by status: %w", err)
	}
	return ops, nil
}

// ListMergedByProject returns MERGED operations of projectID whose merge
// commit is set, oldest first. One query.
func (s *Store) ListMergedByProject(ctx context.Context, db store.DBTX, platform string, projectID int64, limit int) ([]store.Operation, error) {
	ops, err := manyOperations(queries.OperationListMergedByProject(ctx, q(db), &dbsqlc.OperationListMergedByProjectParams{
		Platform: store.PlatformOr(platform), ProjectID: projectID, Status: store.StatusMerged, Max: int32(min(limit, math.MaxInt32))}))
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
			SourceBranch: op.SourceBranch, Title: op.Title, Description: op.Description, Files: files,
			RequestedBy: op.RequestedBy, ApprovalFirst: op.ApprovalFirst, Step: op.Step, Status: op.Status,
			IdempotencyKey: idem, Now: now})
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
		existing, gerr := oneOperation(queries.OperationGetByIdempotencyKey(ctx, s.pool, &op.IdempotencyKey))
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
	n, err := queries.BindingInsertIfAbsent(ctx, tx, &dbsqlc.BindingInsertIfAbsentParams{SubjectID: op.SubjectID,
		TargetKey: op.TargetKey, OperationID: op.ID, Status: op.Status, UpdatedAt: now})
	if err != nil {
		return fmt.Errorf("taking binding: %w", err)
	}
	if n == 1 {
		return nil
	}
	b, err := queries.BindingGetForUpdate(ctx, tx, &dbsqlc.BindingGetForUpdateParams{SubjectID: op.SubjectID, TargetKey: op.TargetKey})
	if err != nil {
		// The row existed at the insert and bindings are never deleted.
		return fmt.Errorf("locking binding: %w", err)
	}
	if !store.IsReappliable(b.Status) {
		return &store.ActiveChangeError{OperationID: b.OperationID, Status: b.Status}
	}
	err = queries.BindingReset(ctx, tx, &dbsqlc.BindingResetParams{SubjectID: op.SubjectID, TargetKey: op.TargetKey,
		OperationID: op.ID, Status: op.Status, UpdatedAt: now})
	if err != nil {
		return fmt.Errorf("resetting binding: %w", err)
	}
	return nil
}

// GetBinding reads a binding; ErrNotFound when there is none.
func (s *Store) GetBinding(ctx context.Context, db store.DBTX, subjectID, targetKey string) (store.Binding, error) {
	r, err := queries.BindingGet(ctx, q(db), &dbsqlc.BindingGetParams{SubjectID: subjectID, TargetKey: targetKey})
	if errors.Is(err, pgx.ErrNoRows) {
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
		Status: r.Status, Version: r.Version, UpdatedAt: r.UpdatedAt.UTC()}
}

// ListOperationIDs returns up to limit operation ids greater than after, in
// order (for paging through every operation).
func (s *Store) ListOperationIDs(ctx context.Context, db store.DBTX, after string, limit int) ([]string, error) {
	ids, err := queries.OperationListIDs(ctx, q(db), &dbsqlc.OperationListIDsParams{After: after, Max: int32(min(limit, math.MaxInt32))})
	if err != nil {
		return nil, fmt.Errorf("listing operation ids: %w", err)
	}
	return ids, nil
}

// ListChanges returns up to p.Limit operations matching p's filters,
// newest first by id, with ids before p.Before (a keyset page: the caller
// passes the last id back to go on). One generated query whose filters
// apply only when set.
func (s *Store) ListChanges(ctx context.Context, db store.DBTX, p store.ListParams) ([]store.Operation, error) {
	// pgx sends a nil slice as NULL, which no filter reads as "unset".
	args := &dbsqlc.OperationListParams{Statuses: orEmpty(p.Statuses), Steps: orEmpty(p.Steps), Project: p.Project,
		SubjectID: p.SubjectID, TargetKey: p.TargetKey, RequestedBy: p.RequestedBy, StuckOnly: p.StuckOnly,
		StuckSteps: []int{}, StuckStartedBefore: []time.Time{}, BeforeID: p.Before, Max: int32(min(p.Limit, math.MaxInt32))}
	if !p.UpdatedAfter.IsZero() {
		args.UpdatedAfter = &p.UpdatedAfter
	}
	if !p.UpdatedBefore.IsZero() {
		args.UpdatedBefore = &p.UpdatedBefore
	}
	for _, b := range p.Stuck {
		args.StuckSteps = append(args.StuckSteps, b.Step)
		args.StuckStartedBefore = append(args.StuckStartedBefore, b.StartedBefore)
	}
	ops, err := manyOperations(queries.OperationList(ctx, q(db), args))
	if err != nil {
		return nil, fmt.Errorf("listing changes: %w", err)
	}
	return ops, nil
}

func orEmpty[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}
