DROP TABLE IF EXISTS gitlab_approvals;
