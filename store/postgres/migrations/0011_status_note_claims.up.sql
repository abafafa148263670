-- 0011: claims on writing an MR's status note. A refresh claims the note in
-- one short statement, calls GitLab holding no transaction or lock, then
-- records the note and releases the claim; a claim left by a replica that
-- died expires at claimed_until.
CREATE TABLE status_note_claims (
    project_id    bigint NOT NULL,
    mr_iid        bigint NOT NULL,
    token         text NOT NULL,
    claimed_until timestamptz NOT NULL,
    PRIMARY KEY (project_id, mr_iid)
);
