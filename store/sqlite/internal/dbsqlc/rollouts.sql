-- name: RolloutCounts :many
-- One aggregate over a rollout's changes (store.ReadRollout): how many
-- are at each project, status and step, the first one's creation and the
-- last update (times as stored: fixed-width UTC text), read through
-- operations_rollout.
SELECT project_id, project, status, step, count(*) AS n,
    CAST(min(created_at) AS TEXT) AS first_created_at, CAST(max(updated_at) AS TEXT) AS last_updated_at
FROM operations
WHERE rollout_id = @rollout_id
GROUP BY project_id, project, status, step
ORDER BY project, status, step;

-- name: RolloutListAtSteps :many
-- Up to max changes of a rollout at one of steps (not empty), oldest
-- update first.
SELECT * FROM operations
WHERE rollout_id = @rollout_id AND step IN (sqlc.slice('steps'))
ORDER BY updated_at, id
LIMIT @max;

-- name: RolloutEnsure :exec
-- The rollout's row, inserted once (the transaction holds the write lock).
INSERT INTO rollouts (rollout_id, updated_at) VALUES (@rollout_id, @now)
ON CONFLICT (rollout_id) DO NOTHING;

-- name: RolloutGetForUpdate :one
-- The write lock of the transaction stands for PostgreSQL's FOR UPDATE.
SELECT * FROM rollouts WHERE rollout_id = @rollout_id;

-- name: RolloutSetState :exec
UPDATE rollouts SET state = @state, notices = @notices, updated_at = @now WHERE rollout_id = @rollout_id;
