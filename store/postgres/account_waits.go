package postgres

import (
	"context"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"
)

// GitLabAccountBlockedUntil implements store.AccountQueries.
func (x executor) GitLabAccountBlockedUntil(ctx context.Context, account string) (time.Time, error) {
	until, err := queries.GitLabAccountBlockedUntil(ctx, x.q, account)
	return until.UTC(), noRows(err)
}

// GitLabAccountBlock implements store.AccountQueries.
func (x executor) GitLabAccountBlock(ctx context.Context, account string, until, at time.Time) error {
	return queries.GitLabAccountBlock(ctx, x.q, &dbsqlc.GitLabAccountBlockParams{Account: account,
		BlockedUntil: until, UpdatedAt: at})
}

// GitLabBudgetTake implements store.AccountQueries: one UPDATE … FROM whose
// row lock queues concurrent takes from every replica.
func (x executor) GitLabBudgetTake(ctx context.Context, p store.BudgetTakeParams) (store.BudgetTake, error) {
	row, err := queries.GitLabBudgetTake(ctx, x.q, &dbsqlc.GitLabBudgetTakeParams{Account: p.Account,
		Capacity: p.Rate.Capacity, NowUs: p.Now.UnixMicro(), PerUs: p.Rate.PerSecond / 1e6, Keep: p.Keep, TakeN: p.N,
		BlockedBefore: p.Now})
	if err != nil {
		return store.BudgetTake{}, noRows(err)
	}
	return store.BudgetTake{Granted: row.Granted, Tokens: row.Tokens, BlockedUntil: row.BlockedUntil.UTC()}, nil
}

// GitLabBudgetEnsure implements store.AccountQueries.
func (x executor) GitLabBudgetEnsure(ctx context.Context, account string, at time.Time) error {
	return queries.GitLabBudgetEnsure(ctx, x.q, &dbsqlc.GitLabBudgetEnsureParams{Account: account, UpdatedAt: at})
}

// GitLabBudgetClamp implements store.AccountQueries.
func (x executor) GitLabBudgetClamp(ctx context.Context, p store.BudgetClampParams) error {
	return queries.GitLabBudgetClamp(ctx, x.q, &dbsqlc.GitLabBudgetClampParams{Account: p.Account,
		Capacity: p.Rate.Capacity, NowUs: p.Now.UnixMicro(), PerUs: p.Rate.PerSecond / 1e6, Remaining: p.Remaining})
}
