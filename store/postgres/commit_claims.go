package postgres

import (
	"context"
	"errors"
	"fmt"

	"changebot/store"

	"github.com/jackc/pgx/v5"
)

// stamp is the claimed_at to write: nil lets the database use now().
func stamp(c store.CommitClaim) any {
	if c.ClaimedAt.IsZero() {
		return nil
	}
	return c.ClaimedAt.UTC()
}

const (
	claimCommitSQL = `INSERT INTO commit_claims (run_id, step, status, branch, seq, token, claimed_at)
VALUES ($1, $2, $3, $4, $5, nextval('commit_claim_tokens'), COALESCE($6::timestamptz, now()))
ON CONFLICT (run_id, step) DO NOTHING
RETURNING token`
	getCommitClaimSQL     = `SELECT status, branch, seq, token, claimed_at FROM commit_claims WHERE run_id = $1 AND step = $2`
	releaseCommitClaimSQL = `DELETE FROM commit_claims WHERE run_id = $1 AND step = $2 AND token = $3`
	seedCommitClaimSQL    = `INSERT INTO commit_claims (run_id, step, status, branch, seq, token, claimed_at)
VALUES ($1, $2, $3, $4, $5, nextval('commit_claim_tokens'), COALESCE($6::timestamptz, now()))
ON CONFLICT (run_id, step) DO NOTHING`
	countCommitClaimsSQL = `SELECT count(*) FROM commit_claims`
)

// ClaimCommit writes claim c unless (c.RunID, c.Step) is claimed already;
// it returns the new claim's token and claimed=true, or claimed=false and
// writes nothing. In a transaction (db a Tx) a concurrent claim of the same
// step waits until that transaction ends. One statement.
func (s *Store) ClaimCommit(ctx context.Context, db store.DBTX, c store.CommitClaim) (token int64, claimed bool, err error) {
	err = q(db).QueryRow(ctx, claimCommitSQL, c.RunID, c.Step, c.Status, c.Branch, c.Seq, stamp(c)).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("inserting commit claim: %w", err)
	}
	return token, true, nil
}

// SeedCommitClaim writes claim c unless (c.RunID, c.Step) is claimed
// already, in which case the existing claim is kept unchanged.
func (s *Store) SeedCommitClaim(ctx context.Context, db store.DBTX, c store.CommitClaim) error {
	if _, err := q(db).Exec(ctx, seedCommitClaimSQL, c.RunID, c.Step, c.Status, c.Branch, c.Seq, stamp(c)); err != nil {
		return fmt.Errorf("seeding commit claim: %w", err)
	}
	return nil
}

// GetCommitClaim reads the claim of (runID, step); ErrNotFound when there
// is none.
func (s *Store) GetCommitClaim(ctx context.Context, db store.DBTX, runID, step string) (store.CommitClaim, error) {
	c := store.CommitClaim{RunID: runID, Step: step}
	err := q(db).QueryRow(ctx, getCommitClaimSQL, runID, step).Scan(&c.Status, &c.Branch, &c.Seq, &c.Token, &c.ClaimedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.CommitClaim{}, store.ErrNotFound
	}
	if err != nil {
		return store.CommitClaim{}, fmt.Errorf("reading commit claim: %w", err)
	}
	c.ClaimedAt = c.ClaimedAt.UTC()
	return c, nil
}

// ReleaseCommitClaim deletes the claim of (runID, step) only if it still
// carries token, and reports whether it did.
func (s *Store) ReleaseCommitClaim(ctx context.Context, db store.DBTX, runID, step string, token int64) (bool, error) {
	tag, err := q(db).Exec(ctx, releaseCommitClaimSQL, runID, step, token)
	if err != nil {
		return false, fmt.Errorf("deleting commit claim: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// CountCommitClaims returns how many claims are held.
func (s *Store) CountCommitClaims(ctx context.Context, db store.DBTX) (int, error) {
	var n int64
	if err := q(db).QueryRow(ctx, countCommitClaimsSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting commit claims: %w", err)
	}
	return int(n), nil
}
