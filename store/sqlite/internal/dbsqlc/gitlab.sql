-- name: GitLabApprovalAdd :execrows
INSERT INTO gitlab_approvals (operation_id, username, source, approved_at)
VALUES (@operation_id, @username, @source, @approved_at)
ON CONFLICT (operation_id, username) DO NOTHING;

-- name: GitLabApprovalRemove :execrows
DELETE FROM gitlab_approvals WHERE operation_id = @operation_id AND username = @username;

-- name: GitLabApprovalCount :one
SELECT count(*) FROM gitlab_approvals a JOIN operations o ON o.id = a.operation_id
WHERE a.operation_id = @operation_id AND a.username <> o.requested_by;

-- name: GitLabApprovalClear :execrows
DELETE FROM gitlab_approvals WHERE operation_id = @operation_id;

-- name: GitLabAccountBlockedUntil :one
SELECT blocked_until FROM gitlab_account_waits WHERE account = @account;

-- name: GitLabAccountBlock :exec
INSERT INTO gitlab_account_waits (account, blocked_until, updated_at)
VALUES (@account, @blocked_until, @updated_at)
ON CONFLICT (account) DO UPDATE
SET blocked_until = max(gitlab_account_waits.blocked_until, excluded.blocked_until),
    updated_at = excluded.updated_at;

-- GitLabBudgetEnsure creates the account row with a full budget and no wait when missing.
-- name: GitLabBudgetEnsure :exec
INSERT INTO gitlab_account_waits (account, blocked_until, updated_at)
VALUES (@account, '1970-01-01 00:00:00.000000', @updated_at)
ON CONFLICT (account) DO NOTHING;
