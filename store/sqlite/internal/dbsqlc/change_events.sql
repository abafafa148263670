-- name: ChangeEventInsert :exec
INSERT INTO change_events (
    operation_id, seq, type, from_step, to_step, from_status, to_status, actor, source, payload,
    schema_version, occurred_at, prev_hash, hash
) VALUES (
    @operation_id, @seq, @type, @from_step, @to_step, @from_status, @to_status, @actor, @source,
    @payload, @schema_version, @occurred_at, @prev_hash, @hash
);

-- name: ChangeEventLast :one
SELECT seq, hash FROM change_events WHERE operation_id = @operation_id ORDER BY seq DESC LIMIT 1;

-- name: ChangeEventList :many
SELECT * FROM change_events WHERE operation_id = @operation_id ORDER BY seq;
