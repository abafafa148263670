-- 0023: rollouts (issue 25 point 3). operations.rollout_id groups the
-- changes submitted with one rollout_id ('' for none), indexed for the
-- rollout's aggregate. rollouts holds, per rollout, the state its last
-- summary notification told (state, '' before the first) and how many it
-- sent (notices, the sequence of its delivery keys); the move that changes
-- the state compares and sets it under the row's lock, in the transaction
-- that enqueues the notification.
ALTER TABLE operations ADD COLUMN rollout_id text NOT NULL DEFAULT '';
CREATE INDEX operations_rollout ON operations (rollout_id, status, step) WHERE rollout_id <> '';

CREATE TABLE rollouts (
    rollout_id  text PRIMARY KEY,
    state       text NOT NULL DEFAULT '',
    notices     bigint NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL
);
