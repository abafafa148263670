-- 0015: every change records its platform (issue 15 point 1): 'gitlab' or
-- 'github'. A project id and a merge/pull request number are only unique
-- within one platform, so every lookup by them (operations, status notes
-- and their claims, commands of comments) names the platform too. Webhook
-- deliveries need none: their dedupe keys differ per platform (GitHub's
-- are "github:" + X-GitHub-Delivery). Rows
-- from before are GitLab's.
ALTER TABLE operations ADD COLUMN platform text NOT NULL DEFAULT 'gitlab';
DROP INDEX operations_mr;
CREATE INDEX operations_mr ON operations (platform, project_id, mr_iid) WHERE mr_iid > 0;

ALTER TABLE status_notes ADD COLUMN platform text NOT NULL DEFAULT 'gitlab';
ALTER TABLE status_notes DROP CONSTRAINT status_notes_pkey;
ALTER TABLE status_notes ADD PRIMARY KEY (platform, project_id, mr_iid);

ALTER TABLE status_note_claims ADD COLUMN platform text NOT NULL DEFAULT 'gitlab';
ALTER TABLE status_note_claims DROP CONSTRAINT status_note_claims_pkey;
ALTER TABLE status_note_claims ADD PRIMARY KEY (platform, project_id, mr_iid);

ALTER TABLE note_commands ADD COLUMN platform text NOT NULL DEFAULT 'gitlab';
ALTER TABLE note_commands DROP CONSTRAINT note_commands_pkey;
ALTER TABLE note_commands ADD PRIMARY KEY (platform, project_id, note_id);
