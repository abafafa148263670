package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// fromRow converts a generated operations row to the store's type.
func fromRow(r dbsqlc.Operations) (store.Operation, error) {
	op := store.Operation{ID: r.ID, Platform: r.Platform, SubjectID: r.SubjectID, TargetKey: r.TargetKey, Project: r.Project,
		ProjectID: r.ProjectID, TargetBranch: r.TargetBranch, SourceBranch: r.SourceBranch, Title: r.Title,
		Description: r.Description, RequestedBy: r.RequestedBy, ApprovalFirst: r.ApprovalFirst, Step: r.Step,
		Status: r.Status, Version: r.Version, TicketID: r.TicketID, MRIID: r.MrIid, MRWebURL: r.MrWebUrl,
		HeadSHA: r.HeadSha, PipelineID: r.PipelineID, PipelineURL: r.PipelineUrl, MergeCommitSHA: r.MergeCommitSha,
		Rounds: r.Rounds, Detail: r.Detail, IdempotencyKey: store.TextOf(r.IdempotencyKey), RolloutID: r.RolloutID, Adopted: r.Adopted,
		StepStartedAt: r.StepStartedAt.UTC(), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	files, err := store.DecodeFiles(op.ID, r.Files)
	if err != nil {
		return store.Operation{}, err
	}
	op.Files = files
	return op, nil
}

// oneOperation converts the result of a generated :one query of operations;
// no row is store.ErrNotFound.
func oneOperation(r dbsqlc.Operations, err error) (store.Operation, error) {
	if err != nil {
		return store.Operation{}, noRows(err)
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

// OperationGet implements store.OperationQueries.
func (x executor) OperationGet(ctx context.Context, id string) (store.Operation, error) {
	return oneOperation(queries.OperationGet(ctx, x.q, id))
}

// OperationGetForUpdate implements store.OperationQueries: SELECT … FOR
// UPDATE.
func (x executor) OperationGetForUpdate(ctx context.Context, id string) (store.Operation, error) {
	return oneOperation(queries.OperationGetForUpdate(ctx, x.q, id))
}

// OperationStepStatusForUpdate implements store.OperationQueries: SELECT …
// FOR UPDATE.
func (x executor) OperationStepStatusForUpdate(ctx context.Context, id string) (int, string, error) {
	r, err := queries.OperationStepStatusForUpdate(ctx, x.q, id)
	return r.Step, r.Status, noRows(err)
}

// OperationExists implements store.OperationQueries.
func (x executor) OperationExists(ctx context.Context, id string) (bool, error) {
	return queries.OperationExists(ctx, x.q, id)
}

// OperationGetByIdempotencyKey implements store.OperationQueries.
func (x executor) OperationGetByIdempotencyKey(ctx context.Context, key string) (store.Operation, error) {
	return oneOperation(queries.OperationGetByIdempotencyKey(ctx, x.q, &key))
}

// OperationNewestOfMR implements store.OperationQueries.
func (x executor) OperationNewestOfMR(ctx context.Context, platform string, projectID, iid int64) (store.Operation, error) {
	return oneOperation(queries.OperationNewestOfMR(ctx, x.q, &dbsqlc.OperationNewestOfMRParams{Platform: platform,
		ProjectID: projectID, MrIid: iid}))
}

// OperationListByStatus implements store.OperationQueries.
func (x executor) OperationListByStatus(ctx context.Context, statuses []string, from, to time.Time, n int) ([]store.Operation, error) {
	return manyOperations(queries.OperationListByStatus(ctx, x.q, &dbsqlc.OperationListByStatusParams{
		Statuses: statuses, UpdatedFrom: from, UpdatedTo: to, Max: limit(n)}))
}

// OperationListMergedByProject implements store.OperationQueries.
func (x executor) OperationListMergedByProject(ctx context.Context, platform string, projectID int64, status string, n int) ([]store.Operation, error) {
	return manyOperations(queries.OperationListMergedByProject(ctx, x.q, &dbsqlc.OperationListMergedByProjectParams{
		Platform: platform, ProjectID: projectID, Status: status, Max: limit(n)}))
}

// OperationListIDs implements store.OperationQueries.
func (x executor) OperationListIDs(ctx context.Context, after string, n int) ([]string, error) {
	return queries.OperationListIDs(ctx, x.q, &dbsqlc.OperationListIDsParams{After: after, Max: limit(n)})
}

// OperationList implements store.OperationQueries with one generated query
// whose filters apply only when set.
func (x executor) OperationList(ctx context.Context, p store.ListParams) ([]store.Operation, error) {
	// pgx sends a nil slice as NULL, which no filter reads as "unset".
	args := &dbsqlc.OperationListParams{Statuses: orEmpty(p.Statuses), Steps: orEmpty(p.Steps), Project: p.Project,
		SubjectID: p.SubjectID, TargetKey: p.TargetKey, RequestedBy: p.RequestedBy, RolloutID: p.RolloutID, StuckOnly: p.StuckOnly,
		StuckSteps: []int{}, StuckStartedBefore: []time.Time{}, BeforeID: p.Before, Max: limit(p.Limit)}
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
	return manyOperations(queries.OperationList(ctx, x.q, args))
}

func orEmpty[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// OperationListWatched implements store.OperationQueries.
func (x executor) OperationListWatched(ctx context.Context, p store.WatchParams) ([]store.Operation, error) {
	return manyOperations(queries.OperationListWatched(ctx, x.q, &dbsqlc.OperationListWatchedParams{
		Statuses: p.Statuses, Steps: p.Steps, After: p.After, Max: limit(p.Limit)}))
}

// stuckColumns are the columns of operations (alias o) that scanOperation
// reads, for the hand-written query over River's jobs
// (OperationListStuck); the other queries are generated.
const stuckColumns = `o.id, o.platform, o.subject_id, o.target_key, o.project, o.project_id, o.target_branch,
	o.source_branch, o.title, o.description, o.files, o.requested_by, o.approval_first, o.step, o.status,
	o.version, o.ticket_id, o.mr_iid, o.mr_web_url, o.head_sha, o.pipeline_id, o.pipeline_url,
	o.merge_commit_sha, o.rounds, o.detail, coalesce(o.idempotency_key, ''), o.rollout_id, o.adopted, o.step_started_at,
	o.created_at, o.updated_at`

// scanOperation reads one row of stuckColumns.
func scanOperation(row pgx.CollectableRow) (store.Operation, error) {
	var op store.Operation
	var files []byte
	err := row.Scan(&op.ID, &op.Platform, &op.SubjectID, &op.TargetKey, &op.Project, &op.ProjectID, &op.TargetBranch,
		&op.SourceBranch, &op.Title, &op.Description, &files, &op.RequestedBy, &op.ApprovalFirst,
		&op.Step, &op.Status, &op.Version, &op.TicketID, &op.MRIID, &op.MRWebURL, &op.HeadSHA,
		&op.PipelineID, &op.PipelineURL, &op.MergeCommitSHA, &op.Rounds, &op.Detail,
		&op.IdempotencyKey, &op.RolloutID, &op.Adopted, &op.StepStartedAt, &op.CreatedAt, &op.UpdatedAt)
	if err != nil {
		return store.Operation{}, err
	}
	if op.Files, err = store.DecodeFiles(op.ID, files); err != nil {
		return store.Operation{}, err
	}
	op.StepStartedAt, op.CreatedAt, op.UpdatedAt = op.StepStartedAt.UTC(), op.CreatedAt.UTC(), op.UpdatedAt.UTC()
	return op, nil
}

// OperationListStuck implements store.OperationQueries.
func (x executor) OperationListStuck(ctx context.Context, p store.StuckParams) ([]store.Operation, error) {
	// Hand-written: it reads River's river_job table (not in our migrations,
	// so sqlc does not know it) through its JSON args.
	rows, err := x.q.Query(ctx, `SELECT `+stuckColumns+` FROM operations o
		WHERE o.step = ANY($1) AND o.updated_at < $3 AND NOT EXISTS (
			SELECT 1 FROM river_job j
			WHERE j.args->>'operation_id' = o.id AND (j.args->>'step')::int = o.step
			  AND j.kind = ANY($2)
			  AND j.state IN ('available', 'pending', 'scheduled', 'running', 'retryable'))
		ORDER BY o.updated_at LIMIT $4`, p.Steps, p.Kinds, p.QuietBefore, p.Limit)
	if err != nil {
		return nil, err
	}
	ops, err := pgx.CollectRows(rows, scanOperation)
	if len(ops) == 0 {
		ops = nil
	}
	return ops, err
}

// OperationCountByStatus implements store.OperationQueries.
func (x executor) OperationCountByStatus(ctx context.Context, statuses []string) ([]store.StatusAge, error) {
	// Hand-written: the statement is built at run time, one UNION ALL
	// branch per status, which sqlc cannot express. One UNION ALL branch
	// per status: the planner sees each status's own value and reads it as
	// an index range (a join over unnest would be planned for an average
	// status, often a scan of the whole table).
	parts := make([]string, len(statuses))
	args := make([]any, len(statuses))
	for i, st := range statuses {
		parts[i] = fmt.Sprintf(`(SELECT $%d::text, count(*), min(updated_at) FROM operations WHERE status = $%[1]d)`, i+1)
		args[i] = st
	}
	rows, err := x.q.Query(ctx, strings.Join(parts, " UNION ALL "), args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.StatusAge, error) {
		var a store.StatusAge
		var oldest *time.Time
		if err := row.Scan(&a.Status, &a.Count, &oldest); err != nil {
			return store.StatusAge{}, err
		}
		if oldest != nil {
			a.OldestUpdatedAt = oldest.UTC()
		}
		return a, nil
	})
}

// OperationInsert implements store.OperationQueries; a unique violation
// (23505) is store.ErrUniqueViolation.
func (x executor) OperationInsert(ctx context.Context, op store.Operation) error {
	files, err := store.EncodeFiles(op.Files)
	if err != nil {
		return err
	}
	err = queries.OperationInsert(ctx, x.q, &dbsqlc.OperationInsertParams{ID: op.ID, Platform: op.Platform,
		SubjectID: op.SubjectID, TargetKey: op.TargetKey, Project: op.Project, ProjectID: op.ProjectID,
		TargetBranch: op.TargetBranch, SourceBranch: op.SourceBranch, Title: op.Title, Description: op.Description,
		Files: files, RequestedBy: op.RequestedBy, ApprovalFirst: op.ApprovalFirst, Step: op.Step, Status: op.Status,
		IdempotencyKey: store.NullText(op.IdempotencyKey), RolloutID: op.RolloutID, MrIid: op.MRIID, MrWebUrl: op.MRWebURL, HeadSha: op.HeadSHA, Adopted: op.Adopted, Now: op.CreatedAt})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
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
	return queries.OperationUpdate(ctx, x.q, &dbsqlc.OperationUpdateParams{ID: op.ID, ProjectID: op.ProjectID,
		TargetBranch: op.TargetBranch, SourceBranch: op.SourceBranch, Files: files, Step: op.Step, Status: op.Status,
		Version: op.Version, TicketID: op.TicketID, MrIid: op.MRIID, MrWebUrl: op.MRWebURL,
		HeadSha: op.HeadSHA, PipelineID: op.PipelineID, PipelineUrl: op.PipelineURL, MergeCommitSha: op.MergeCommitSHA,
		Rounds: op.Rounds, Detail: op.Detail, StepStartedAt: op.StepStartedAt, UpdatedAt: op.UpdatedAt})
}

// ReconcileCandidates implements store.OperationQueries.
func (x executor) ReconcileCandidates(ctx context.Context, status string, p store.ReconcileParams) ([]store.ReconcileCandidate, error) {
	rows, err := queries.ReconcileCandidates(ctx, x.q, &dbsqlc.ReconcileCandidatesParams{Status: status,
		UpdatedAfter: p.After, UpdatedBefore: p.Before, Max: limit(p.Limit)})
	if err != nil {
		return nil, err
	}
	var out []store.ReconcileCandidate
	for _, r := range rows {
		op, err := fromRow(r.Operations)
		if err != nil {
			return nil, err
		}
		out = append(out, store.ReconcileCandidate{Operation: op, Watermarked: r.Watermarked})
	}
	return out, nil
}

// DeployConfirmationRecord implements store.OperationQueries.
func (x executor) DeployConfirmationRecord(ctx context.Context, c store.DeployConfirmation, at time.Time) error {
	return queries.DeployConfirmationRecord(ctx, x.q, &dbsqlc.DeployConfirmationRecordParams{ProjectID: c.ProjectID,
		TargetBranch: c.TargetBranch, MrIid: c.MRIID, ConfirmedAt: at})
}

// fromBinding converts a generated bindings row to the store's type.
func fromBinding(r dbsqlc.Bindings, err error) (store.Binding, error) {
	if err != nil {
		return store.Binding{}, noRows(err)
	}
	return store.Binding{SubjectID: r.SubjectID, TargetKey: r.TargetKey, OperationID: r.OperationID,
		Status: r.Status, Version: r.Version, UpdatedAt: r.UpdatedAt.UTC()}, nil
}

// BindingGet implements store.OperationQueries.
func (x executor) BindingGet(ctx context.Context, subjectID, targetKey string) (store.Binding, error) {
	return fromBinding(queries.BindingGet(ctx, x.q, &dbsqlc.BindingGetParams{SubjectID: subjectID, TargetKey: targetKey}))
}

// BindingGetForUpdate implements store.OperationQueries: SELECT … FOR
// UPDATE.
func (x executor) BindingGetForUpdate(ctx context.Context, subjectID, targetKey string) (store.Binding, error) {
	return fromBinding(queries.BindingGetForUpdate(ctx, x.q, &dbsqlc.BindingGetForUpdateParams{SubjectID: subjectID,
		TargetKey: targetKey}))
}

// BindingInsertIfAbsent implements store.OperationQueries: INSERT … ON
// CONFLICT DO NOTHING, which waits for a concurrent inserter's
// transaction.
func (x executor) BindingInsertIfAbsent(ctx context.Context, b store.Binding) (bool, error) {
	n, err := queries.BindingInsertIfAbsent(ctx, x.q, &dbsqlc.BindingInsertIfAbsentParams{SubjectID: b.SubjectID,
		TargetKey: b.TargetKey, OperationID: b.OperationID, Status: b.Status, UpdatedAt: b.UpdatedAt})
	return n == 1, err
}

// BindingReset implements store.OperationQueries.
func (x executor) BindingReset(ctx context.Context, b store.Binding) error {
	return queries.BindingReset(ctx, x.q, &dbsqlc.BindingResetParams{SubjectID: b.SubjectID, TargetKey: b.TargetKey,
		OperationID: b.OperationID, Status: b.Status, UpdatedAt: b.UpdatedAt})
}

// BindingSetStatus implements store.OperationQueries.
func (x executor) BindingSetStatus(ctx context.Context, subjectID, targetKey, status string, at time.Time) error {
	return queries.BindingSetStatus(ctx, x.q, &dbsqlc.BindingSetStatusParams{SubjectID: subjectID,
		TargetKey: targetKey, Status: status, UpdatedAt: at})
}
