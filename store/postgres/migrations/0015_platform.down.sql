-- Reverting keeps GitLab's rows only: another platform's would collide on
-- the narrower keys.
DELETE FROM note_commands WHERE platform <> 'gitlab';
ALTER TABLE note_commands DROP CONSTRAINT note_commands_pkey;
ALTER TABLE note_commands DROP COLUMN platform;
ALTER TABLE note_commands ADD PRIMARY KEY (project_id, note_id);

DELETE FROM status_note_claims WHERE platform <> 'gitlab';
ALTER TABLE status_note_claims DROP CONSTRAINT status_note_claims_pkey;
ALTER TABLE status_note_claims DROP COLUMN platform;
ALTER TABLE status_note_claims ADD PRIMARY KEY (project_id, mr_iid);

DELETE FROM status_notes WHERE platform <> 'gitlab';
ALTER TABLE status_notes DROP CONSTRAINT status_notes_pkey;
ALTER TABLE status_notes DROP COLUMN platform;
ALTER TABLE status_notes ADD PRIMARY KEY (project_id, mr_iid);

DROP INDEX operations_mr;
CREATE INDEX operations_mr ON operations (project_id, mr_iid) WHERE mr_iid > 0;
ALTER TABLE operations DROP COLUMN platform;
