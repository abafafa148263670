-- name: OperationGet :one
SELECT * FROM operations WHERE id = @id;

-- name: OperationExists :one
SELECT EXISTS (SELECT 1 FROM operations WHERE id = @id);

-- name: OperationGetByIdempotencyKey :one
SELECT * FROM operations WHERE idempotency_key = @idempotency_key;

-- name: OperationGetForUpdate :one
SELECT * FROM operations WHERE id = @id FOR UPDATE;

-- name: OperationStepStatusForUpdate :one
SELECT step, status FROM operations WHERE id = @id FOR UPDATE;

-- name: OperationNewestOfMR :one
SELECT * FROM operations
WHERE platform = @platform AND project_id = @project_id AND mr_iid = @mr_iid
ORDER BY created_at DESC
LIMIT 1;

-- name: OperationListByStatus :many
SELECT * FROM operations
WHERE status = ANY(@statuses::text[])
    AND updated_at >= @updated_from::timestamptz
    AND updated_at < @updated_to::timestamptz
ORDER BY updated_at
LIMIT @max;

-- name: OperationListMergedByProject :many
SELECT * FROM operations
WHERE platform = @platform AND project_id = @project_id AND status = @status AND merge_commit_sha <> ''
ORDER BY updated_at
LIMIT @max;

-- name: OperationListIDs :many
SELECT id FROM operations WHERE id > @after ORDER BY id LIMIT @max;

-- name: OperationInsert :exec
INSERT INTO operations (
    id, platform, subject_id, target_key, project, project_id, target_branch, source_branch, title,
    description, files, requested_by, approval_first, step, status, version, idempotency_key,
    rollout_id, mr_iid, mr_web_url, head_sha, adopted, step_started_at, created_at, updated_at
) VALUES (
    @id, @platform, @subject_id, @target_key, @project, @project_id, @target_branch, @source_branch, @title,
    @description, @files, @requested_by, @approval_first, @step, @status, 1,
    sqlc.narg('idempotency_key'), @rollout_id, @mr_iid, @mr_web_url, @head_sha, @adopted, @now, @now, @now
);

-- name: OperationUpdate :exec
UPDATE operations SET
    project_id = @project_id,
    target_branch = @target_branch,
    source_branch = @source_branch,
    files = @files,
    step = @step,
    status = @status,
    version = @version,
    ticket_id = @ticket_id,
    mr_iid = @mr_iid,
    mr_web_url = @mr_web_url,
    head_sha = @head_sha,
    pipeline_id = @pipeline_id,
    pipeline_url = @pipeline_url,
    merge_commit_sha = @merge_commit_sha,
    rounds = @rounds,
    detail = @detail,
    step_started_at = @step_started_at,
    updated_at = @updated_at
WHERE id = @id;

-- name: OperationList :many
-- The list API's page (store.ListParams): each filter applies only when
-- set (an empty list or text, a NULL time, stuck_only false), so one
-- statement serves every combination. Newest first by id (a ULID fixed at
-- creation: a keyset that changes never move).
SELECT * FROM operations
WHERE (cardinality(@statuses::text[]) = 0 OR status = ANY(@statuses::text[]))
    AND (cardinality(@steps::int[]) = 0 OR step = ANY(@steps::int[]))
    AND (@project::text = '' OR lower(project) = lower(@project::text) OR project_id::text = @project::text)
    AND (@subject_id::text = '' OR subject_id = @subject_id::text)
    AND (@target_key::text = '' OR target_key = @target_key::text)
    AND (@requested_by::text = '' OR requested_by = @requested_by::text)
    AND (@rollout_id::text = '' OR rollout_id = @rollout_id::text)
    AND (sqlc.narg(updated_after)::timestamptz IS NULL OR updated_at > sqlc.narg(updated_after)::timestamptz)
    AND (sqlc.narg(updated_before)::timestamptz IS NULL OR updated_at < sqlc.narg(updated_before)::timestamptz)
    -- stuck_steps[i] is stuck once its step started before
    -- stuck_started_before[i]; a step not listed gives NULL (not stuck).
    AND (NOT @stuck_only::bool OR step_started_at <
        (@stuck_started_before::timestamptz[])[array_position(@stuck_steps::int[], step)])
    AND (@before_id::text = '' OR id < @before_id::text)
ORDER BY id DESC
LIMIT @max;
