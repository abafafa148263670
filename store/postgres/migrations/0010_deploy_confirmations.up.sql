-- 0010: confirmed deploys per (project, target branch, MR), the reconciler's
-- watermark (DESIGN §3 step 8). It used to read accepted deploy callbacks of
-- any branch of the project, and missed confirmed deploys whose callback was
-- answered IGNORED_STALE (the change was already validated by its pipeline).
CREATE TABLE deploy_confirmations (
    project_id    bigint NOT NULL,
    target_branch text NOT NULL,
    mr_iid        bigint NOT NULL,
    confirmed_at  timestamptz NOT NULL,
    PRIMARY KEY (project_id, target_branch, mr_iid)
);

INSERT INTO deploy_confirmations (project_id, target_branch, mr_iid, confirmed_at)
SELECT o.project_id, o.target_branch, o.mr_iid, max(cr.received_at)
  FROM callback_requests cr JOIN operations o ON o.id = cr.operation_id
 WHERE cr.kind = 'deploy' AND cr.result = 'ACCEPTED' AND o.mr_iid > 0
 GROUP BY o.project_id, o.target_branch, o.mr_iid;
