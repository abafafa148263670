-- name: OperationGet :one
SELECT * FROM operations WHERE id = @id;

-- name: OperationExists :one
SELECT EXISTS (SELECT 1 FROM operations WHERE id = @id);

-- name: OperationGetByIdempotencyKey :one
SELECT * FROM operations WHERE idempotency_key = @idempotency_key;

-- name: OperationStepStatus :one
SELECT step, status FROM operations WHERE id = @id;

-- name: OperationNewestOfMR :one
SELECT * FROM operations
WHERE platform = @platform AND project_id = @project_id AND mr_iid = @mr_iid
ORDER BY created_at DESC
LIMIT 1;

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
    sqlc.narg('idempotency_key'), @rollout_id, @mr_iid, @mr_web_url, @head_sha, @adopted, @step_started_at, @created_at, @updated_at
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

-- name: OperationCountByStatus :many
SELECT status, count(*) AS n, min(updated_at) AS oldest_updated_at
FROM operations
WHERE status IN (sqlc.slice('statuses'))
GROUP BY status;
