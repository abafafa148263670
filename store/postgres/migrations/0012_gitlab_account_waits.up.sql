-- 0012: how long each GitLab account must wait after a 429 (issue 10 point 4).
-- One row per account, read before a GitLab call and written when GitLab
-- answers 429, so that every replica respects one account's wait. A later
-- per-account call budget builds on this table.
CREATE TABLE gitlab_account_waits (
    account       text PRIMARY KEY,
    blocked_until timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);
