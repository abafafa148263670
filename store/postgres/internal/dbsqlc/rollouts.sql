-- name: RolloutCounts :many
-- One aggregate over a rollout's changes (store.ReadRollout): how many
-- are at each project, status and step, the first one's creation and the
-- last update, read through operations_rollout.
SELECT project_id, project, status, step, count(*)::bigint AS n,
    min(created_at)::timestamptz AS first_created_at, max(updated_at)::timestamptz AS last_updated_at
FROM operations
WHERE rollout_id = @rollout_id
GROUP BY project_id, project, status, step
ORDER BY project, status, step;

-- name: RolloutListAtSteps :many
-- Up to max changes of a rollout at one of steps, oldest update first.
SELECT * FROM operations
WHERE rollout_id = @rollout_id AND step = ANY(@steps::int[])
ORDER BY updated_at, id
LIMIT @max;

-- name: RolloutEnsure :exec
-- The rollout's row, inserted once; a concurrent inserter waits for the
-- first one's transaction and then inserts nothing.
INSERT INTO rollouts (rollout_id, updated_at) VALUES (@rollout_id, @now)
ON CONFLICT (rollout_id) DO NOTHING;

-- name: RolloutGetForUpdate :one
SELECT * FROM rollouts WHERE rollout_id = @rollout_id FOR UPDATE;

-- name: RolloutSetState :exec
UPDATE rollouts SET state = @state, notices = @notices, updated_at = @now WHERE rollout_id = @rollout_id;
