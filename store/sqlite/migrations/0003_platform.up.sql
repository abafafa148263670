-- 0003: every change records its platform (issue 15 point 1): 'gitlab' or
-- 'github'. A project id and a merge/pull request number are only unique
-- within one platform, so every lookup by them (operations, status notes
-- and their claims, commands of comments) names the platform too. Webhook
-- deliveries need none: their dedupe keys differ per platform (GitHub's
-- are "github:" + X-GitHub-Delivery). Rows
-- from before are GitLab's. SQLite cannot change a primary key in place:
-- the keyed tables are rebuilt (no foreign key points at them).
ALTER TABLE operations ADD COLUMN platform TEXT NOT NULL DEFAULT 'gitlab';
DROP INDEX operations_mr;
CREATE INDEX operations_mr ON operations (platform, project_id, mr_iid) WHERE mr_iid > 0;

CREATE TABLE status_notes_new (
    platform     TEXT NOT NULL DEFAULT 'gitlab',
    project_id   INTEGER NOT NULL,
    mr_iid       INTEGER NOT NULL,
    note_id      INTEGER NOT NULL,
    operation_id TEXT NOT NULL,
    rendered_seq INTEGER NOT NULL,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (platform, project_id, mr_iid)
);
INSERT INTO status_notes_new (project_id, mr_iid, note_id, operation_id, rendered_seq, updated_at)
    SELECT project_id, mr_iid, note_id, operation_id, rendered_seq, updated_at FROM status_notes;
DROP TABLE status_notes;
ALTER TABLE status_notes_new RENAME TO status_notes;

CREATE TABLE status_note_claims_new (
    platform      TEXT NOT NULL DEFAULT 'gitlab',
    project_id    INTEGER NOT NULL,
    mr_iid        INTEGER NOT NULL,
    token         TEXT NOT NULL,
    claimed_until TEXT NOT NULL,
    PRIMARY KEY (platform, project_id, mr_iid)
);
INSERT INTO status_note_claims_new (project_id, mr_iid, token, claimed_until)
    SELECT project_id, mr_iid, token, claimed_until FROM status_note_claims;
DROP TABLE status_note_claims;
ALTER TABLE status_note_claims_new RENAME TO status_note_claims;

CREATE TABLE note_commands_new (
    platform    TEXT NOT NULL DEFAULT 'gitlab',
    project_id  INTEGER NOT NULL,
    note_id     INTEGER NOT NULL,
    mr_iid      INTEGER NOT NULL,
    author      TEXT NOT NULL,
    outcome     TEXT NOT NULL DEFAULT '',
    received_at TEXT NOT NULL,
    PRIMARY KEY (platform, project_id, note_id)
);
INSERT INTO note_commands_new (project_id, note_id, mr_iid, author, outcome, received_at)
    SELECT project_id, note_id, mr_iid, author, outcome, received_at FROM note_commands;
DROP TABLE note_commands;
ALTER TABLE note_commands_new RENAME TO note_commands;
CREATE INDEX note_commands_author ON note_commands (author, received_at);
