ALTER TABLE gitlab_account_waits
    DROP COLUMN tokens,
    DROP COLUMN refilled_us,
    DROP COLUMN granted;
