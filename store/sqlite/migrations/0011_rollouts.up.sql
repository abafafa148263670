-- 0011, as PostgreSQL's 0023: rollouts (issue 25 point 3).
-- operations.rollout_id groups the changes submitted with one rollout_id
-- ('' for none), indexed for the rollout's aggregate. rollouts holds, per
-- rollout, the state its last summary notification told (state, '' before
-- the first) and how many it sent (notices, the sequence of its delivery
-- keys), compared and set by the move that changes the state, in the
-- transaction that enqueues the notification.
ALTER TABLE operations ADD COLUMN rollout_id TEXT NOT NULL DEFAULT '';
CREATE INDEX operations_rollout ON operations (rollout_id, status, step) WHERE rollout_id <> '';

CREATE TABLE rollouts (
    rollout_id  TEXT PRIMARY KEY,
    state       TEXT NOT NULL DEFAULT '',
    notices     INTEGER NOT NULL DEFAULT 0,
    updated_at  TEXT NOT NULL
);
