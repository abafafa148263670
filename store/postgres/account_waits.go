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

// AccountBlockedUntil returns until when GitLab asked account to wait (a
// 429's Retry-After, RateLimit-Reset or the default minute), or the zero
// time when it never did. The moment may have passed. account is the GitLab
// adapter's key of one account (instance and token fingerprint); every
// replica reads the same row (issue 10 point 4).
func (s *Store) AccountBlockedUntil(ctx context.Context, account string) (time.Time, error) {
	until, err := queries.GitLabAccountBlockedUntil(ctx, s.pool, account)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the wait of gitlab account %s: %w", account, err)
	}
	return until.UTC(), nil
}

// BlockAccountUntil records that account must send nothing to GitLab
// before until. A later moment already recorded is kept (two replicas
// answered 429 at once: the longer wait wins). One statement.
func (s *Store) BlockAccountUntil(ctx context.Context, account string, until time.Time) error {
	err := queries.GitLabAccountBlock(ctx, s.pool, &dbsqlc.GitLabAccountBlockParams{Account: account,
		BlockedUntil: until.UTC(), UpdatedAt: s.Now()})
	if err != nil {
		return fmt.Errorf("recording the wait of gitlab account %s: %w", account, err)
	}
	return nil
}

// TakeAccountBudget implements store.AccountWaits with one UPDATE of the
// account's row (created on the first take): its row lock queues
// concurrent takes from every replica, so none overdraws.
func (s *Store) TakeAccountBudget(ctx context.Context, p store.BudgetTakeParams) (store.BudgetTake, error) {
	args := &dbsqlc.GitLabBudgetTakeParams{Account: p.Account, Capacity: p.Rate.Capacity,
		NowUs: p.Now.UnixMicro(), PerUs: p.Rate.PerSecond / 1e6, Keep: p.Keep, TakeN: p.N, BlockedBefore: p.Now.UTC()}
	row, err := queries.GitLabBudgetTake(ctx, s.pool, args)
	if errors.Is(err, pgx.ErrNoRows) {
		if err = queries.GitLabBudgetEnsure(ctx, s.pool, &dbsqlc.GitLabBudgetEnsureParams{Account: p.Account, UpdatedAt: s.Now()}); err == nil {
			row, err = queries.GitLabBudgetTake(ctx, s.pool, args)
		}
	}
	if err != nil {
		return store.BudgetTake{}, fmt.Errorf("taking from the call budget of gitlab account %s: %w", p.Account, err)
	}
	return store.BudgetTake{Granted: row.Granted, Tokens: row.Tokens, BlockedUntil: row.BlockedUntil.UTC()}, nil
}

// ClampAccountBudget implements store.AccountWaits: one UPDATE; an
// account without a row has taken nothing yet and is left alone.
func (s *Store) ClampAccountBudget(ctx context.Context, p store.BudgetClampParams) error {
	err := queries.GitLabBudgetClamp(ctx, s.pool, &dbsqlc.GitLabBudgetClampParams{Account: p.Account,
		Capacity: p.Rate.Capacity, NowUs: p.Now.UnixMicro(), PerUs: p.Rate.PerSecond / 1e6, Remaining: p.Remaining})
	if err != nil {
		return fmt.Errorf("lowering the call budget of gitlab account %s: %w", p.Account, err)
	}
	return nil
}
