package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"changebot/store"
	"changebot/store/sqlite/internal/dbsqlc"
	"changebot/store/sqlite/internal/dbtime"
)

// opColumns and scanOperation serve the hand-written queries of operations
// (those over River's jobs and those whose lists sqlc cannot bind); the
// others are generated (internal/dbsqlc).
const opColumns = `id, platform, subject_id, target_key, project, project_id, target_branch, source_branch,
	title, description, files, requested_by, approval_first, step, status, version, ticket_id,
	mr_iid, mr_web_url, head_sha, pipeline_id, pipeline_url, merge_commit_sha, rounds, detail,
	coalesce(idempotency_key, ''), rollout_id, adopted, step_started_at, created_at, updated_at`

// scanOperation reads one row of opColumns from rows.
func scanOperation(rows *sql.Rows) (store.Operation, error) {
	var op store.Operation
	var files []byte
	err := rows.Scan(&op.ID, &op.Platform, &op.SubjectID, &op.TargetKey, &op.Project, &op.ProjectID, &op.TargetBranch,
		&op.SourceBranch, &op.Title, &op.Description, &files, &op.RequestedBy, &op.ApprovalFirst,
		&op.Step, &op.Status, &op.Version, &op.TicketID, &op.MRIID, &op.MRWebURL, &op.HeadSHA,
		&op.PipelineID, &op.PipelineURL, &op.MergeCommitSHA, &op.Rounds, &op.Detail,
		&op.IdempotencyKey, &op.RolloutID, &op.Adopted, tm{&op.StepStartedAt}, tm{&op.CreatedAt}, tm{&op.UpdatedAt})
	if err != nil {
		return store.Operation{}, err
	}
	if op.Files, err = store.DecodeFiles(op.ID, files); err != nil {
		return store.Operation{}, err
	}
	return op, nil
}

// collectOperations reads every row of a hand-written query of opColumns.
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

// fromRow converts a generated operations row to the store's type.
func fromRow(r dbsqlc.Operations) (store.Operation, error) {
	op := store.Operation{ID: r.ID, Platform: r.Platform, SubjectID: r.SubjectID, TargetKey: r.TargetKey,
		Project: r.Project, ProjectID: r.ProjectID, TargetBranch: r.TargetBranch, SourceBranch: r.SourceBranch,
		Title: r.Title, Description: r.Description, RequestedBy: r.RequestedBy, ApprovalFirst: r.ApprovalFirst,
		Step: r.Step, Status: r.Status, Version: r.Version, TicketID: r.TicketID, MRIID: r.MrIid,
		MRWebURL: r.MrWebUrl, HeadSHA: r.HeadSha, PipelineID: r.PipelineID, PipelineURL: r.PipelineUrl,
		MergeCommitSHA: r.MergeCommitSha, Rounds: r.Rounds, Detail: r.Detail,
		IdempotencyKey: store.TextOf(r.IdempotencyKey), RolloutID: r.RolloutID, Adopted: r.Adopted,
		StepStartedAt: r.StepStartedAt.Time, CreatedAt: r.CreatedAt.Time, UpdatedAt: r.UpdatedAt.Time}
	files, err := store.DecodeFiles(op.ID, []byte(r.Files))
	if err != nil {
		return store.Operation{}, err
	}
	op.Files = files
	return op, nil
}

// oneOperation converts the result of a generated :one query of
// operations; no row is store.ErrNotFound.
func oneOperation(r dbsqlc.Operations, err error) (store.Operation, error) {
	if err != nil {
		return store.Operation{}, noRows(err)
	}
	return fromRow(r)
}

// OperationGet implements store.OperationQueries.
func (x executor) OperationGet(ctx context.Context, id string) (store.Operation, error) {
	return oneOperation(queries.OperationGet(ctx, x.ex, id))
}

// OperationExists implements store.OperationQueries.
func (x executor) OperationExists(ctx context.Context, id string) (bool, error) {
	return queries.OperationExists(ctx, x.ex, id)
}

// OperationGetByIdempotencyKey implements store.OperationQueries.
func (x executor) OperationGetByIdempotencyKey(ctx context.Context, key string) (store.Operation, error) {
	return oneOperation(queries.OperationGetByIdempotencyKey(ctx, x.ex, &key))
}

// OperationNewestOfMR implements store.OperationQueries.
func (x executor) OperationNewestOfMR(ctx context.Context, platform string, projectID, iid int64) (store.Operation, error) {
	return oneOperation(queries.OperationNewestOfMR(ctx, x.ex, &dbsqlc.OperationNewestOfMRParams{Platform: platform,
		ProjectID: projectID, MrIid: iid}))
}

// OperationListByStatus implements store.OperationQueries.
func (x executor) OperationListByStatus(ctx context.Context, statuses []string, from, to time.Time, limit int) ([]store.Operation, error) {
	// Hand-written: sqlc v1.31.1 numbers the parameters after an
	// sqlc.slice list (?2, ?3) as if the list were one value, so with two
	// or more statuses the time bounds read a status (as in
	// OperationListWatched).
	list, args := in(statuses)
	args = append(args, from, to, limit)
	return collectOperations(x.query(ctx, `SELECT `+opColumns+` FROM operations
		WHERE status IN (`+list+`) AND updated_at >= ? AND updated_at < ?
		ORDER BY updated_at LIMIT ?`, args...))
}

// OperationListMergedByProject implements store.OperationQueries.
func (x executor) OperationListMergedByProject(ctx context.Context, platform string, projectID int64, status string, limit int) ([]store.Operation, error) {
	rows, err := queries.OperationListMergedByProject(ctx, x.ex, &dbsqlc.OperationListMergedByProjectParams{
		Platform: platform, ProjectID: projectID, Status: status, Max: int64(limit)})
	return operations(rows, err, func(r dbsqlc.Operations) dbsqlc.Operations { return r })
}

// operations converts generated rows holding an operations row (got
// picks it out).
func operations[R any](rows []R, err error, got func(R) dbsqlc.Operations) ([]store.Operation, error) {
	if err != nil {
		return nil, err
	}
	var out []store.Operation
	for _, r := range rows {
		op, err := fromRow(got(r))
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, nil
}

// OperationListIDs implements store.OperationQueries.
func (x executor) OperationListIDs(ctx context.Context, after string, limit int) ([]string, error) {
	return queries.OperationListIDs(ctx, x.ex, &dbsqlc.OperationListIDsParams{After: after, Max: int64(limit)})
}

// OperationListWatched implements store.OperationQueries.
func (x executor) OperationListWatched(ctx context.Context, p store.WatchParams) ([]store.Operation, error) {
	// Hand-written: sqlc numbers the parameters after two sqlc.slice lists
	// (?3, ?4) as if each list were one value, so with more than one status
	// or step LIMIT read a step and SQLite answered "datatype mismatch".
	statuses, stArgs := in(p.Statuses)
	steps, spArgs := in(p.Steps)
	args := append(append(stArgs, spArgs...), p.After, p.Limit)
	return collectOperations(x.query(ctx, `SELECT `+opColumns+` FROM operations
		WHERE status IN (`+statuses+`) AND step IN (`+steps+`) AND mr_iid > 0 AND id > ?
		ORDER BY id LIMIT ?`, args...))
}

// OperationCountByStatus implements store.OperationQueries.
func (x executor) OperationCountByStatus(ctx context.Context, statuses []string) ([]store.StatusAge, error) {
	rows, err := queries.OperationCountByStatus(ctx, x.ex, statuses)
	if err != nil {
		return nil, err
	}
	out := make([]store.StatusAge, 0, len(rows))
	for _, r := range rows {
		// min(updated_at) has no column type for sqlc: it comes as the
		// stored text, read as dbtime.Time reads its column.
		var oldest dbtime.Time
		if err := oldest.Scan(r.OldestUpdatedAt); err != nil {
			return nil, err
		}
		out = append(out, store.StatusAge{Status: r.Status, Count: int(r.N), OldestUpdatedAt: oldest.Time})
	}
	return out, nil
}

// OperationInsert implements store.OperationQueries; a violated unique or
// primary key constraint is store.ErrUniqueViolation.
func (x executor) OperationInsert(ctx context.Context, op store.Operation) error {
	files, err := store.EncodeFiles(op.Files)
	if err != nil {
		return err
	}
	err = queries.OperationInsert(ctx, x.ex, &dbsqlc.OperationInsertParams{ID: op.ID, Platform: op.Platform,
		SubjectID: op.SubjectID, TargetKey: op.TargetKey, Project: op.Project, ProjectID: op.ProjectID,
		TargetBranch: op.TargetBranch, SourceBranch: op.SourceBranch, Title: op.Title, Description: op.Description,
		Files: string(files), RequestedBy: op.RequestedBy, ApprovalFirst: op.ApprovalFirst, Step: op.Step, Status: op.Status,
		IdempotencyKey: store.NullText(op.IdempotencyKey), RolloutID: op.RolloutID, MrIid: op.MRIID, MrWebUrl: op.MRWebURL, HeadSha: op.HeadSHA, Adopted: op.Adopted, StepStartedAt: dbtime.Of(op.StepStartedAt), CreatedAt: dbtime.Of(op.CreatedAt),
		UpdatedAt: dbtime.Of(op.UpdatedAt)})
	if isUnique(err) {
		return fmt.Errorf("%w: %w", store.ErrUniqueViolation, err)
	}
	return err
}

// OperationUpdate implements store.OperationQueries.
func (x executor) OperationUpdate(ctx context.Context, op store.Operation) error {
	files, err := store.EncodeFiles(op.Files)
	if err != nil {
		return err
	}
	return queries.OperationUpdate(ctx, x.ex, &dbsqlc.OperationUpdateParams{ID: op.ID, ProjectID: op.ProjectID,
		TargetBranch: op.TargetBranch, SourceBranch: op.SourceBranch, Files: string(files), Step: op.Step,
		Status: op.Status, Version: op.Version, TicketID: op.TicketID, MrIid: op.MRIID, MrWebUrl: op.MRWebURL,
		HeadSha: op.HeadSHA, PipelineID: op.PipelineID, PipelineUrl: op.PipelineURL,
		MergeCommitSha: op.MergeCommitSHA, Rounds: op.Rounds, Detail: op.Detail,
		StepStartedAt: dbtime.Of(op.StepStartedAt), UpdatedAt: dbtime.Of(op.UpdatedAt)})
}

// ReconcileCandidates implements store.OperationQueries.
func (x executor) ReconcileCandidates(ctx context.Context, status string, p store.ReconcileParams) ([]store.ReconcileCandidate, error) {
	rows, err := queries.ReconcileCandidates(ctx, x.ex, &dbsqlc.ReconcileCandidatesParams{Status: status,
		UpdatedAfter: dbtime.Of(p.After), UpdatedBefore: dbtime.Of(p.Before), Max: int64(p.Limit)})
	ops, err := operations(rows, err, func(r dbsqlc.ReconcileCandidatesRow) dbsqlc.Operations { return r.Operations })
	if err != nil {
		return nil, err
	}
	var out []store.ReconcileCandidate
	for i, op := range ops {
		out = append(out, store.ReconcileCandidate{Operation: op, Watermarked: rows[i].Watermarked})
	}
	return out, nil
}

// DeployConfirmationRecord implements store.OperationQueries.
func (x executor) DeployConfirmationRecord(ctx context.Context, c store.DeployConfirmation, at time.Time) error {
	return queries.DeployConfirmationRecord(ctx, x.ex, &dbsqlc.DeployConfirmationRecordParams{ProjectID: c.ProjectID,
		TargetBranch: c.TargetBranch, MrIid: c.MRIID, ConfirmedAt: dbtime.Of(at)})
}

// BindingGet implements store.OperationQueries.
func (x executor) BindingGet(ctx context.Context, subjectID, targetKey string) (store.Binding, error) {
	r, err := queries.BindingGet(ctx, x.ex, &dbsqlc.BindingGetParams{SubjectID: subjectID, TargetKey: targetKey})
	if err != nil {
		return store.Binding{}, noRows(err)
	}
	return store.Binding{SubjectID: r.SubjectID, TargetKey: r.TargetKey, OperationID: r.OperationID,
		Status: r.Status, Version: r.Version, UpdatedAt: r.UpdatedAt.Time}, nil
}

// BindingInsertIfAbsent implements store.OperationQueries.
func (x executor) BindingInsertIfAbsent(ctx context.Context, b store.Binding) (bool, error) {
	n, err := queries.BindingInsertIfAbsent(ctx, x.ex, &dbsqlc.BindingInsertIfAbsentParams{SubjectID: b.SubjectID,
		TargetKey: b.TargetKey, OperationID: b.OperationID, Status: b.Status, UpdatedAt: dbtime.Of(b.UpdatedAt)})
	return n == 1, err
}

// BindingReset implements store.OperationQueries.
func (x executor) BindingReset(ctx context.Context, b store.Binding) error {
	return queries.BindingReset(ctx, x.ex, &dbsqlc.BindingResetParams{SubjectID: b.SubjectID, TargetKey: b.TargetKey,
		OperationID: b.OperationID, Status: b.Status, UpdatedAt: dbtime.Of(b.UpdatedAt)})
}

// BindingSetStatus implements store.OperationQueries.
func (x executor) BindingSetStatus(ctx context.Context, subjectID, targetKey, status string, at time.Time) error {
	return queries.BindingSetStatus(ctx, x.ex, &dbsqlc.BindingSetStatusParams{SubjectID: subjectID,
		TargetKey: targetKey, Status: status, UpdatedAt: dbtime.Of(at)})
}
