-- name: CommitClaimTokenMint :execlastid
-- SQLite has no sequences: a token is the id of a new AUTOINCREMENT row
-- (never reused, so a released claim's token is never minted again).
INSERT INTO commit_claim_tokens (token) VALUES (NULL);

-- name: CommitClaimInsert :execrows
INSERT INTO commit_claims (run_id, step, status, branch, seq, token, claimed_at)
VALUES (@run_id, @step, @status, @branch, @seq, @token, @claimed_at)
ON CONFLICT (run_id, step) DO NOTHING;

-- name: CommitClaimGet :one
SELECT * FROM commit_claims WHERE run_id = @run_id AND step = @step;

-- name: CommitClaimRelease :execrows
DELETE FROM commit_claims WHERE run_id = @run_id AND step = @step AND token = @token;

-- name: CommitClaimCount :one
SELECT count(*) FROM commit_claims;

-- name: StatusNoteGet :one
SELECT * FROM status_notes WHERE platform = @platform AND project_id = @project_id AND mr_iid = @mr_iid;

-- name: StatusNoteSave :execrows
INSERT INTO status_notes (platform, project_id, mr_iid, note_id, operation_id, rendered_seq, updated_at)
VALUES (@platform, @project_id, @mr_iid, @note_id, @operation_id, @rendered_seq, @updated_at)
ON CONFLICT (platform, project_id, mr_iid) DO UPDATE
SET note_id = excluded.note_id, operation_id = excluded.operation_id,
    rendered_seq = excluded.rendered_seq, updated_at = excluded.updated_at
WHERE status_notes.rendered_seq <= excluded.rendered_seq
    OR status_notes.note_id <> excluded.note_id
    OR status_notes.operation_id <> excluded.operation_id;

-- name: StatusNoteRenew :execrows
UPDATE status_note_claims SET claimed_until = @claimed_until
WHERE platform = @platform AND project_id = @project_id AND mr_iid = @mr_iid AND token = @token;

-- name: StatusNoteRelease :exec
DELETE FROM status_note_claims WHERE platform = @platform AND project_id = @project_id AND mr_iid = @mr_iid AND token = @token;
