-- 0022: the last valid .changebot.yml of each project's target branch
-- (issue 25 point 2). A change reads the file from its target branch when
-- it starts; a valid file is stored here, and while the branch holds an
-- invalid one the row's policy governs. body is the file as read, sha the
-- commit it was read at, read_at when: a write of an older read never
-- replaces a newer one.
CREATE TABLE repo_policies (
    platform   text        NOT NULL,
    project_id bigint      NOT NULL,
    branch     text        NOT NULL,
    sha        text        NOT NULL,
    body       text        NOT NULL,
    read_at    timestamptz NOT NULL,
    PRIMARY KEY (platform, project_id, branch)
);
