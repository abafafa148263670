DROP TABLE gitlab_account_waits;
