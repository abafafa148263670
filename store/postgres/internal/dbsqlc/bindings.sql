-- name: BindingInsertIfAbsent :execrows
INSERT INTO bindings (subject_id, target_key, operation_id, status, version, updated_at)
VALUES (@subject_id, @target_key, @operation_id, @status, 1, @updated_at)
ON CONFLICT (subject_id, target_key) DO NOTHING;

-- name: BindingGet :one
SELECT * FROM bindings WHERE subject_id = @subject_id AND target_key = @target_key;

-- name: BindingGetForUpdate :one
SELECT * FROM bindings WHERE subject_id = @subject_id AND target_key = @target_key FOR UPDATE;

-- name: BindingReset :exec
UPDATE bindings
SET operation_id = @operation_id, status = @status, version = version + 1, updated_at = @updated_at
WHERE subject_id = @subject_id AND target_key = @target_key;

-- name: BindingSetStatus :exec
UPDATE bindings
SET status = @status, version = version + 1, updated_at = @updated_at
WHERE subject_id = @subject_id AND target_key = @target_key;
