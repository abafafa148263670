-- name: CommitClaimInsert :one
INSERT INTO commit_claims (run_id, step, status, branch, seq, token, claimed_at)
VALUES (@run_id, @step, @status, @branch, @seq, nextval('commit_claim_tokens'),
    COALESCE(sqlc.narg('claimed_at')::timestamptz, now()))
ON CONFLICT (run_id, step) DO NOTHING
RETURNING token;

-- name: CommitClaimSeed :exec
INSERT INTO commit_claims (run_id, step, status, branch, seq, token, claimed_at)
VALUES (@run_id, @step, @status, @branch, @seq, nextval('commit_claim_tokens'),
    COALESCE(sqlc.narg('claimed_at')::timestamptz, now()))
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

-- name: StatusNoteClaim :one
-- No row while a live claim holds the MR; taken_over when the row was an
-- expired claim (xmax is set on an updated row, 0 on an inserted one).
INSERT INTO status_note_claims (platform, project_id, mr_iid, token, claimed_until)
VALUES (@platform, @project_id, @mr_iid, @token, @claimed_until)
ON CONFLICT (platform, project_id, mr_iid) DO UPDATE
SET token = excluded.token, claimed_until = excluded.claimed_until
WHERE status_note_claims.claimed_until <= @now
RETURNING (xmax <> 0)::boolean AS taken_over;

-- name: StatusNoteRenew :execrows
UPDATE status_note_claims SET claimed_until = @claimed_until
WHERE platform = @platform AND project_id = @project_id AND mr_iid = @mr_iid AND token = @token;

-- name: StatusNoteRelease :exec
DELETE FROM status_note_claims WHERE platform = @platform AND project_id = @project_id AND mr_iid = @mr_iid AND token = @token;

-- name: StatusNoteCurrent :one
SELECT o.platform, o.project_id, o.mr_iid,
    CAST(COALESCE((SELECT max(e.seq) FROM change_events e WHERE e.operation_id = o.id), 0) AS bigint) AS last_seq,
    CAST(COALESCE(n.operation_id, '') AS text) AS note_operation_id,
    CAST(COALESCE(n.rendered_seq, 0) AS bigint) AS rendered_seq
FROM operations o
LEFT JOIN status_notes n ON n.platform = o.platform AND n.project_id = o.project_id AND n.mr_iid = o.mr_iid
WHERE o.id = @id;
