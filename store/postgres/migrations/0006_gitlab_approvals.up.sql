-- 0006: human approvals of the in-GitLab approval mode, one per approver
-- per operation (an MR Hook "approved" and a /approve note count once).
CREATE TABLE gitlab_approvals (
    operation_id text NOT NULL REFERENCES operations (id),
    username     text NOT NULL,
    source       text NOT NULL,
    approved_at  timestamptz NOT NULL,
    PRIMARY KEY (operation_id, username)
);
