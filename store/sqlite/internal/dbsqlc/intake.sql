-- name: DeliveryGet :one
SELECT * FROM webhook_deliveries WHERE id = @id;

-- name: DeliveryMarkProcessed :exec
UPDATE webhook_deliveries SET processed_at = @processed_at, outcome = @outcome WHERE id = @id;

-- name: DeliveryCount :one
SELECT count(*) FROM webhook_deliveries;

-- name: DeliveryLastID :one
SELECT CAST(coalesce(max(id), 0) AS INTEGER) AS id FROM webhook_deliveries;

-- name: DeliveryListAfter :many
SELECT id, dedupe_key, event, project_id, received_at FROM webhook_deliveries
WHERE id > @after
ORDER BY id
LIMIT 100;

-- name: DeliveryPrune :execrows
DELETE FROM webhook_deliveries WHERE id IN (
    SELECT d.id FROM webhook_deliveries d WHERE d.received_at < @before AND d.processed_at IS NOT NULL
    ORDER BY d.received_at LIMIT @max
);

-- name: CallbackRequestInsertIfNew :execrows
INSERT INTO callback_requests (request_id, kind, operation_id, result, received_at)
VALUES (@request_id, @kind, @operation_id, @result, @received_at)
ON CONFLICT (kind, request_id) DO NOTHING;

-- name: CallbackRequestResult :one
SELECT result FROM callback_requests WHERE kind = @kind AND request_id = @request_id;

-- name: CallbackRequestPrune :execrows
DELETE FROM callback_requests WHERE rowid IN (
    SELECT c.rowid FROM callback_requests c WHERE c.received_at < @before
    ORDER BY c.received_at LIMIT @max
);

-- name: NoteCommandClaim :execrows
INSERT INTO note_commands (platform, project_id, note_id, mr_iid, author, received_at)
VALUES (@platform, @project_id, @note_id, @mr_iid, @author, @received_at)
ON CONFLICT (platform, project_id, note_id) DO NOTHING;

-- name: NoteCommandSetOutcome :exec
UPDATE note_commands SET outcome = @outcome WHERE platform = @platform AND project_id = @project_id AND note_id = @note_id;

-- name: NoteCommandActivity :one
SELECT count(*) AS notes, count(*) FILTER (WHERE outcome = 'rate_limited') AS limited
FROM note_commands
WHERE author = @author AND received_at >= @since;

-- name: DeliveryListUndispatched :many
-- The oldest deliveries whose jobs are not enqueued yet (migration 0006);
-- SQLite's one writer keeps two dispatchers from taking the same rows.
SELECT id FROM webhook_deliveries
WHERE dispatched_at IS NULL
ORDER BY id
LIMIT @max;

-- name: DeliveryMarkDispatched :exec
UPDATE webhook_deliveries SET dispatched_at = @dispatched_at WHERE id = @id;
