-- 0003: MR comments whose commands ran (a command runs once per note id).
CREATE TABLE note_commands (
    project_id   bigint NOT NULL,
    note_id      bigint NOT NULL,
    mr_iid       bigint NOT NULL,
    author       text NOT NULL,
    outcome      text NOT NULL DEFAULT '',
    received_at  timestamptz NOT NULL,
    PRIMARY KEY (project_id, note_id)
);
CREATE INDEX note_commands_author ON note_commands (author, received_at);
