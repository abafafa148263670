package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"

	"github.com/jackc/pgx/v5"
)

// stamp is the claimed_at to write: nil lets the database use now().
func stamp(c store.CommitClaim) *time.Time {
	if c.ClaimedAt.IsZero() {
		return nil
	}
	t := c.ClaimedAt.UTC()
	return &t
}

// ClaimCommit writes claim c unless (c.RunID, c.Step) is claimed already;
// it returns the new claim's token and claimed=true, or claimed=false and
// writes nothing. In a transaction (db a Tx) a concurrent claim of the same
// step waits until that transaction ends. One statement.
func (s *Store) ClaimCommit(ctx context.Context, db store.DBTX, c store.CommitClaim) (token int64, claimed bool, err error) {
	token, err = queries.CommitClaimInsert(ctx, q(db), &dbsqlc.CommitClaimInsertParams{RunID: c.RunID, Step: c.Step,
		Status: c.Status, Branch: c.Branch, Seq: c.Seq, ClaimedAt: stamp(c)})
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
	if err := queries.CommitClaimSeed(ctx, q(db), &dbsqlc.CommitClaimSeedParams{RunID: c.RunID, Step: c.Step,
		Status: c.Status, Branch: c.Branch, Seq: c.Seq, ClaimedAt: stamp(c)}); err != nil {
		return fmt.Errorf("seeding commit claim: %w", err)
	}
	return nil
}

// GetCommitClaim reads the claim of (runID, step); ErrNotFound when there
// is none.
func (s *Store) GetCommitClaim(ctx context.Context, db store.DBTX, runID, step string) (store.CommitClaim, error) {
	r, err := queries.CommitClaimGet(ctx, q(db), &dbsqlc.CommitClaimGetParams{RunID: runID, Step: step})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.CommitClaim{}, store.ErrNotFound
	}
	if err != nil {
		return store.CommitClaim{}, fmt.Errorf("reading commit claim: %w", err)
	}
	return store.CommitClaim{RunID: r.RunID, Step: r.Step, Status: r.Status, Branch: r.Branch, Seq: r.Seq,
		Token: r.Token, ClaimedAt: r.ClaimedAt.UTC()}, nil
}

// ReleaseCommitClaim deletes the claim of (runID, step) only if it still
// carries token, and reports whether it did.
func (s *Store) ReleaseCommitClaim(ctx context.Context, db store.DBTX, runID, step string, token int64) (bool, error) {
	n, err := queries.CommitClaimRelease(ctx, q(db), &dbsqlc.CommitClaimReleaseParams{RunID: runID, Step: step, Token: token})
	if err != nil {
		return false, fmt.Errorf("deleting commit claim: %w", err)
	}
	return n == 1, nil
}

// CountCommitClaims returns how many claims are held.
func (s *Store) CountCommitClaims(ctx context.Context, db store.DBTX) (int, error) {
	n, err := queries.CommitClaimCount(ctx, q(db))
	if err != nil {
		return 0, fmt.Errorf("counting commit claims: %w", err)
	}
	return int(n), nil
}
