-- 0010: the last valid .changebot.yml of each project's target branch (the
-- PostgreSQL migration 0022's table; read_at in the fixed-width UTC text of
-- every time column).
CREATE TABLE repo_policies (
    platform   TEXT    NOT NULL,
    project_id INTEGER NOT NULL,
    branch     TEXT    NOT NULL,
    sha        TEXT    NOT NULL,
    body       TEXT    NOT NULL,
    read_at    TEXT    NOT NULL,
    PRIMARY KEY (platform, project_id, branch)
);
