-- 0012: the PostgreSQL migration 0024's column and index: a change that
-- adopted a developer's merge request, one in progress per merge request.
ALTER TABLE operations ADD COLUMN adopted INTEGER NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX operations_adopted_mr ON operations (platform, project_id, mr_iid)
    WHERE adopted AND status NOT IN ('VALIDATED', 'REJECTED', 'CLOSED');
