package postgres

import (
	"context"
	"errors"
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

// CommitClaimInsert implements store.CommitClaimQueries: one INSERT … ON
// CONFLICT DO NOTHING RETURNING the token (nextval of commit_claim_tokens).
// In a transaction a concurrent claim of the same step waits until that
// transaction ends.
func (x executor) CommitClaimInsert(ctx context.Context, c store.CommitClaim) (int64, bool, error) {
	token, err := queries.CommitClaimInsert(ctx, x.q, &dbsqlc.CommitClaimInsertParams{RunID: c.RunID, Step: c.Step,
		Status: c.Status, Branch: c.Branch, Seq: c.Seq, ClaimedAt: stamp(c)})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return token, err == nil, err
}

// CommitClaimSeed implements store.CommitClaimQueries.
func (x executor) CommitClaimSeed(ctx context.Context, c store.CommitClaim) error {
	return queries.CommitClaimSeed(ctx, x.q, &dbsqlc.CommitClaimSeedParams{RunID: c.RunID, Step: c.Step,
		Status: c.Status, Branch: c.Branch, Seq: c.Seq, ClaimedAt: stamp(c)})
}

// CommitClaimGet implements store.CommitClaimQueries.
func (x executor) CommitClaimGet(ctx context.Context, runID, step string) (store.CommitClaim, error) {
	r, err := queries.CommitClaimGet(ctx, x.q, &dbsqlc.CommitClaimGetParams{RunID: runID, Step: step})
	if err != nil {
		return store.CommitClaim{}, noRows(err)
	}
	return store.CommitClaim{RunID: r.RunID, Step: r.Step, Status: r.Status, Branch: r.Branch, Seq: r.Seq,
		Token: r.Token, ClaimedAt: r.ClaimedAt.UTC()}, nil
}

// CommitClaimRelease implements store.CommitClaimQueries.
func (x executor) CommitClaimRelease(ctx context.Context, runID, step string, token int64) (bool, error) {
	n, err := queries.CommitClaimRelease(ctx, x.q, &dbsqlc.CommitClaimReleaseParams{RunID: runID, Step: step, Token: token})
	return n == 1, err
}

// CommitClaimCount implements store.CommitClaimQueries.
func (x executor) CommitClaimCount(ctx context.Context) (int64, error) {
	return queries.CommitClaimCount(ctx, x.q)
}
