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
SET blocked_until = GREATEST(gitlab_account_waits.blocked_until, excluded.blocked_until),
    updated_at = excluded.updated_at;

-- GitLabBudgetEnsure creates the account row with a full budget and no wait when missing.
-- name: GitLabBudgetEnsure :exec
INSERT INTO gitlab_account_waits (account, blocked_until, updated_at)
VALUES (@account, 'epoch', @updated_at)
ON CONFLICT (account) DO NOTHING;

-- GitLabBudgetTake takes take_n tokens from the bucket of the account:
-- refill by the time since the last take (per_us tokens per microsecond, up
-- to capacity), then take when the account has no wait and at least
-- keep + take_n tokens are there. The row lock makes concurrent takes (any
-- replica) queue: none overdraws.
-- name: GitLabBudgetTake :one
WITH p AS (
    SELECT @capacity::float8 AS capacity, @now_us::bigint AS now_us, @per_us::float8 AS per_us,
        @keep::float8 AS keep, @take_n::float8 AS take_n, @blocked_before::timestamptz AS blocked_before
)
UPDATE gitlab_account_waits AS w SET
    tokens = LEAST(p.capacity, CASE WHEN w.refilled_us = 0 THEN p.capacity ELSE w.tokens END + GREATEST(0, p.now_us - CASE WHEN w.refilled_us = 0 THEN p.now_us ELSE w.refilled_us END) * p.per_us)
           - CASE WHEN w.blocked_until <= p.blocked_before AND LEAST(p.capacity, CASE WHEN w.refilled_us = 0 THEN p.capacity ELSE w.tokens END + GREATEST(0, p.now_us - CASE WHEN w.refilled_us = 0 THEN p.now_us ELSE w.refilled_us END) * p.per_us) >= p.keep + p.take_n THEN p.take_n ELSE 0 END,
    granted = (w.blocked_until <= p.blocked_before AND LEAST(p.capacity, CASE WHEN w.refilled_us = 0 THEN p.capacity ELSE w.tokens END + GREATEST(0, p.now_us - CASE WHEN w.refilled_us = 0 THEN p.now_us ELSE w.refilled_us END) * p.per_us) >= p.keep + p.take_n),
    refilled_us = GREATEST(CASE WHEN w.refilled_us = 0 THEN p.now_us ELSE w.refilled_us END, p.now_us)
FROM p
WHERE w.account = @account
RETURNING w.tokens, w.blocked_until, w.granted;

-- GitLabBudgetClamp: GitLab said how many calls the account has left
-- (RateLimit-Remaining); after the refill the bucket never holds more.
-- name: GitLabBudgetClamp :exec
WITH p AS (
    SELECT @capacity::float8 AS capacity, @now_us::bigint AS now_us, @per_us::float8 AS per_us,
        @remaining::float8 AS remaining
)
UPDATE gitlab_account_waits AS w SET
    tokens = LEAST(p.remaining, LEAST(p.capacity, CASE WHEN w.refilled_us = 0 THEN p.capacity ELSE w.tokens END + GREATEST(0, p.now_us - CASE WHEN w.refilled_us = 0 THEN p.now_us ELSE w.refilled_us END) * p.per_us)),
    refilled_us = GREATEST(CASE WHEN w.refilled_us = 0 THEN p.now_us ELSE w.refilled_us END, p.now_us)
FROM p
WHERE w.account = @account;
