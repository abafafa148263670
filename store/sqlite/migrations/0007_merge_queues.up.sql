-- 0007, as PostgreSQL's 0019: the merge queue of each (platform, project, target branch) (issue
-- 22 point 2). A row exists once a change joined the queue or an operator
-- froze the branch. head_operation_id is the one change allowed to be
-- rebased, tested and merged now ('' when none): taken by a compare-and-set
-- in the transaction that moves the change to the head, given back in the
-- transaction that moves it away, so all replicas agree. frozen_* say who
-- froze the branch and why (frozen_at NULL: not frozen). The waiting
-- changes are the operations at the queue's waiting step, in the order
-- they became ready (step_started_at); merge_queue_fronts holds those an
-- operator moved to the front.
CREATE TABLE merge_queues (
    platform          TEXT NOT NULL,
    project_id        INTEGER NOT NULL,
    target_branch     TEXT NOT NULL,
    head_operation_id TEXT NOT NULL DEFAULT '',
    head_since        TEXT,
    frozen_by         TEXT NOT NULL DEFAULT '',
    frozen_reason     TEXT NOT NULL DEFAULT '',
    frozen_at         TEXT,
    updated_at        TEXT NOT NULL,
    PRIMARY KEY (platform, project_id, target_branch)
);

CREATE TABLE merge_queue_fronts (
    operation_id TEXT PRIMARY KEY,
    moved_by     TEXT NOT NULL,
    reason       TEXT NOT NULL DEFAULT '',
    moved_at     TEXT NOT NULL
);

CREATE INDEX operations_queue ON operations (platform, project_id, target_branch, step);
