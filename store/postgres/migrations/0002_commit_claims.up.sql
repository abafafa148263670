-- 0002: exclusive terminal commits (DESIGN §6, flows/commitgate). One row per
-- (run, step) that has committed a terminal side effect; token is minted by
-- commit_claim_tokens so a release can be conditional on it.
CREATE SEQUENCE commit_claim_tokens;

CREATE TABLE commit_claims (
    run_id     text NOT NULL,
    step       text NOT NULL,
    status     text NOT NULL,
    branch     text NOT NULL DEFAULT '',
    seq        bigint NOT NULL DEFAULT 0,
    token      bigint NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step)
);
