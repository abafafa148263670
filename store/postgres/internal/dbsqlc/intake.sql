-- name: DeliveryGet :one
SELECT * FROM webhook_deliveries WHERE id = @id;

-- name: DeliveryMarkProcessed :exec
UPDATE webhook_deliveries SET processed_at = @processed_at, outcome = @outcome WHERE id = @id;

-- name: DeliveryCount :one
SELECT count(*) FROM webhook_deliveries;

-- name: DeliveryLastID :one
SELECT coalesce(max(id), 0)::bigint AS id FROM webhook_deliveries;

-- name: DeliveryListAfter :many
SELECT id, dedupe_key, event, project_id, received_at FROM webhook_deliveries
WHERE id > @after
ORDER BY id
LIMIT 100;

-- name: DeliveryPrune :execrows
DELETE FROM webhook_deliveries WHERE id IN (
    SELECT d.id FROM webhook_deliveries d WHERE d.received_at < @before::timestamptz AND d.processed_at IS NOT NULL
    ORDER BY d.received_at LIMIT @max
);

-- name: CallbackRequestInsertIfNew :execrows
INSERT INTO callback_requests (request_id, kind, operation_id, result, received_at)
VALUES (@request_id, @kind, @operation_id, @result, @received_at)
ON CONFLICT (kind, request_id) DO NOTHING;

-- name: CallbackRequestResult :one
SELECT result FROM callback_requests WHERE kind = @kind AND request_id = @request_id;

-- name: CallbackRequestPrune :execrows
DELETE FROM callback_requests WHERE (kind, request_id) IN (
    SELECT c.kind, c.request_id FROM callback_requests c WHERE c.received_at < @before::timestamptz
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

-- name: DeliveryInsertManyIfNew :many
-- One statement for a batch of deliveries (group commit, issue 12): the
-- arrays are zipped by unnest; keys stored before are skipped.
-- With dispatched false the rows wait for the dispatcher (dispatched_at
-- NULL, migration 0018); with true their jobs are enqueued in the same
-- transaction.
INSERT INTO webhook_deliveries (dedupe_key, event, project_id, body, received_at, dispatched_at)
SELECT unnest(@dedupe_keys::text[]), unnest(@events::text[]), unnest(@project_ids::bigint[]),
       unnest(@bodies::bytea[]), @received_at::timestamptz,
       CASE WHEN @dispatched::boolean THEN @received_at::timestamptz END
ON CONFLICT (dedupe_key) DO NOTHING
RETURNING id, dedupe_key;

-- name: DeliveryLockUndispatched :many
-- The oldest deliveries whose jobs are not enqueued yet, locked for the
-- dispatcher's transaction; rows another replica's dispatcher holds are
-- skipped, so no delivery is enqueued twice.
SELECT id FROM webhook_deliveries
WHERE dispatched_at IS NULL
ORDER BY id
LIMIT @max
FOR UPDATE SKIP LOCKED;

-- name: DeliveryMarkDispatched :exec
UPDATE webhook_deliveries SET dispatched_at = @dispatched_at::timestamptz WHERE id = ANY(@ids::bigint[]);
