-- name: SettingList :many
SELECT * FROM settings ORDER BY key, scope;

-- name: SettingValue :one
SELECT value FROM settings WHERE key = @key AND scope = @scope;

-- name: SettingDelete :exec
DELETE FROM settings WHERE key = @key AND scope = @scope;

-- name: SettingUpsert :one
INSERT INTO settings (key, scope, value, updated_by, updated_at)
VALUES (@key, @scope, json(@value), @updated_by, @updated_at)
ON CONFLICT (key, scope) DO UPDATE
SET value = excluded.value, updated_by = excluded.updated_by, updated_at = excluded.updated_at
RETURNING value;

-- name: SettingAuditInsert :exec
INSERT INTO settings_audit (key, scope, old_value, new_value, updated_by, updated_at)
VALUES (@key, @scope, sqlc.narg('old_value'), sqlc.narg('new_value'), @updated_by, @updated_at);

-- name: SettingAuditList :many
SELECT * FROM settings_audit WHERE key = @key AND scope = @scope ORDER BY id;
