-- name: ReconcileCandidates :many
SELECT sqlc.embed(o), EXISTS (
    SELECT 1 FROM deploy_confirmations d
    WHERE d.project_id = o.project_id AND d.target_branch = o.target_branch
        AND d.mr_iid >= o.mr_iid AND d.confirmed_at >= o.updated_at
) AS watermarked
FROM operations o
WHERE o.status = @status AND o.merge_commit_sha <> ''
    AND o.updated_at > @updated_after AND o.updated_at < @updated_before
ORDER BY o.project_id, o.target_branch, o.updated_at, o.id
LIMIT @max;

-- name: DeployConfirmationRecord :exec
INSERT INTO deploy_confirmations (project_id, target_branch, mr_iid, confirmed_at)
VALUES (@project_id, @target_branch, @mr_iid, @confirmed_at)
ON CONFLICT (project_id, target_branch, mr_iid)
DO UPDATE SET confirmed_at = max(deploy_confirmations.confirmed_at, excluded.confirmed_at);

