ALTER TABLE gitlab_account_waits DROP COLUMN granted;
ALTER TABLE gitlab_account_waits DROP COLUMN refilled_us;
ALTER TABLE gitlab_account_waits DROP COLUMN tokens;
