-- 0016: a call budget per GitLab account, shared by every replica (issue 12
-- point 4): a token bucket on the account's wait row. tokens is what was
-- left after the last take, refilled_us the Unix time in microseconds it
-- was computed at (0: never, the bucket is full), granted whether the last
-- take was granted (what the take statement returns). A row created by the
-- budget has blocked_until at the Unix epoch (no wait).
ALTER TABLE gitlab_account_waits
    ADD COLUMN tokens      double precision NOT NULL DEFAULT 0,
    ADD COLUMN refilled_us bigint NOT NULL DEFAULT 0,
    ADD COLUMN granted     boolean NOT NULL DEFAULT false;
