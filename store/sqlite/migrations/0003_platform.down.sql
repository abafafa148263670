-- Reverting keeps GitLab's rows only: another platform's would collide on
-- the narrower keys.
CREATE TABLE note_commands_old (
    project_id  INTEGER NOT NULL,
    note_id     INTEGER NOT NULL,
    mr_iid      INTEGER NOT NULL,
    author      TEXT NOT NULL,
    outcome     TEXT NOT NULL DEFAULT '',
    received_at TEXT NOT NULL,
    PRIMARY KEY (project_id, note_id)
);
INSERT INTO note_commands_old (project_id, note_id, mr_iid, author, outcome, received_at)
    SELECT project_id, note_id, mr_iid, author, outcome, received_at FROM note_commands WHERE platform = 'gitlab';
DROP TABLE note_commands;
ALTER TABLE note_commands_old RENAME TO note_commands;
CREATE INDEX note_commands_author ON note_commands (author, received_at);

CREATE TABLE status_note_claims_old (
    project_id    INTEGER NOT NULL,
    mr_iid        INTEGER NOT NULL,
    token         TEXT NOT NULL,
    claimed_until TEXT NOT NULL,
    PRIMARY KEY (project_id, mr_iid)
);
INSERT INTO status_note_claims_old (project_id, mr_iid, token, claimed_until)
    SELECT project_id, mr_iid, token, claimed_until FROM status_note_claims WHERE platform = 'gitlab';
DROP TABLE status_note_claims;
ALTER TABLE status_note_claims_old RENAME TO status_note_claims;

CREATE TABLE status_notes_old (
    project_id   INTEGER NOT NULL,
    mr_iid       INTEGER NOT NULL,
    note_id      INTEGER NOT NULL,
    operation_id TEXT NOT NULL,
    rendered_seq INTEGER NOT NULL,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (project_id, mr_iid)
);
INSERT INTO status_notes_old (project_id, mr_iid, note_id, operation_id, rendered_seq, updated_at)
    SELECT project_id, mr_iid, note_id, operation_id, rendered_seq, updated_at FROM status_notes WHERE platform = 'gitlab';
DROP TABLE status_notes;
ALTER TABLE status_notes_old RENAME TO status_notes;

DROP INDEX operations_mr;
ALTER TABLE operations DROP COLUMN platform;
CREATE INDEX operations_mr ON operations (project_id, mr_iid) WHERE mr_iid > 0;
