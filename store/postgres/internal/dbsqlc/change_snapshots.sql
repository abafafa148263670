-- name: ChangeSnapshotInsert :exec
INSERT INTO change_snapshots (operation_id, seq, occurred_at, state)
VALUES (@operation_id, @seq, @occurred_at, @state)
ON CONFLICT (operation_id, seq) DO NOTHING;

-- name: ChangeSnapshotNearest :one
SELECT * FROM change_snapshots
WHERE operation_id = @operation_id AND occurred_at <= @at
ORDER BY seq DESC LIMIT 1;

-- name: ChangeEventListAfter :many
SELECT * FROM change_events WHERE operation_id = @operation_id AND seq > @after ORDER BY seq;
