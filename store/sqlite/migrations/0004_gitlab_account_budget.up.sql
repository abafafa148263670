-- 0004: a call budget per GitLab account, shared by every replica (issue 12
-- point 4): a token bucket on the account's wait row. tokens is what was
-- left after the last take, refilled_us the Unix time in microseconds it
-- was computed at (0: never, the bucket is full), granted whether the last
-- take was granted (what the take statement returns). A row created by the
-- budget has blocked_until at the Unix epoch (no wait).
ALTER TABLE gitlab_account_waits ADD COLUMN tokens REAL NOT NULL DEFAULT 0;
ALTER TABLE gitlab_account_waits ADD COLUMN refilled_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gitlab_account_waits ADD COLUMN granted INTEGER NOT NULL DEFAULT 0;
