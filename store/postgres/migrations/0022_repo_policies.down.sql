DROP TABLE repo_policies;
