DROP TABLE IF EXISTS commit_claims;
DROP SEQUENCE IF EXISTS commit_claim_tokens;
