package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"changebot/store"
	"changebot/store/sqlite/internal/dbsqlc"
	"changebot/store/sqlite/internal/dbtime"
)

// DeliveryInsertMany implements store.IntakeQueries with one multi-row
// INSERT … ON CONFLICT DO NOTHING RETURNING of the new keys, in ds's order.
func (x executor) DeliveryInsertMany(ctx context.Context, ds []store.Delivery, receivedAt time.Time, dispatched bool) (map[string]int64, error) {
	// Hand-written: sqlc's SQLite engine cannot repeat a VALUES row for a
	// slice. Every value is bound; six per row stays far below SQLite's
	// 32,766 parameters for any batch the intake makes.
	now := dbtime.Of(receivedAt)
	var dispatchedAt *dbtime.Time
	if dispatched {
		dispatchedAt = &now
	}
	var query strings.Builder
	query.WriteString(`INSERT INTO webhook_deliveries (dedupe_key, event, project_id, body, received_at, dispatched_at) VALUES `)
	args := make([]any, 0, 6*len(ds))
	for i, d := range ds {
		if i > 0 {
			query.WriteString(", ")
		}
		query.WriteString("(?, ?, ?, ?, ?, ?)")
		args = append(args, d.DedupeKey, d.Event, d.ProjectID, d.Body, now, dispatchedAt)
	}
	query.WriteString(` ON CONFLICT (dedupe_key) DO NOTHING RETURNING id, dedupe_key`)
	rows, err := x.ex.QueryContext(ctx, query.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := make(map[string]int64)
	for rows.Next() {
		var id int64
		var key string
		if err := rows.Scan(&id, &key); err != nil {
			return nil, err
		}
		ids[key] = id
	}
	return ids, rows.Err()
}

// DeliveryMarkDispatched implements store.IntakeQueries: one UPDATE per
// delivery (sqlc's SQLite engine binds no list in an UPDATE).
func (x executor) DeliveryMarkDispatched(ctx context.Context, ids []int64, at time.Time) error {
	stamp := dbtime.Of(at)
	for _, id := range ids {
		if err := queries.DeliveryMarkDispatched(ctx, x.ex, &dbsqlc.DeliveryMarkDispatchedParams{DispatchedAt: &stamp, ID: id}); err != nil {
			return err
		}
	}
	return nil
}

// DeliveryGet implements store.IntakeQueries.
func (x executor) DeliveryGet(ctx context.Context, id int64) (store.Delivery, error) {
	r, err := queries.DeliveryGet(ctx, x.ex, id)
	if err != nil {
		return store.Delivery{}, noRows(err)
	}
	return store.Delivery{ID: r.ID, DedupeKey: r.DedupeKey, Event: r.Event, ProjectID: r.ProjectID, Body: r.Body,
		ReceivedAt: r.ReceivedAt.Time, Outcome: r.Outcome, ProcessedAt: timeOrNil(r.ProcessedAt),
		DispatchedAt: timeOrNil(r.DispatchedAt)}, nil
}

// timeOrNil is the time of a nullable column.
func timeOrNil(t *dbtime.Time) *time.Time {
	if t == nil {
		return nil
	}
	return &t.Time
}

// DeliveryMarkProcessed implements store.IntakeQueries.
func (x executor) DeliveryMarkProcessed(ctx context.Context, id int64, outcome string, at time.Time) error {
	stamp := dbtime.Of(at)
	return queries.DeliveryMarkProcessed(ctx, x.ex, &dbsqlc.DeliveryMarkProcessedParams{ID: id, ProcessedAt: &stamp, Outcome: outcome})
}

// DeliveryCount implements store.IntakeQueries.
func (x executor) DeliveryCount(ctx context.Context) (int64, error) {
	return queries.DeliveryCount(ctx, x.ex)
}

// DeliveryLastID implements store.IntakeQueries.
func (x executor) DeliveryLastID(ctx context.Context) (int64, error) {
	return queries.DeliveryLastID(ctx, x.ex)
}

// DeliveryListAfter implements store.IntakeQueries.
func (x executor) DeliveryListAfter(ctx context.Context, after int64) ([]store.Delivery, error) {
	rows, err := queries.DeliveryListAfter(ctx, x.ex, after)
	return convert(rows, err, func(r dbsqlc.DeliveryListAfterRow) store.Delivery {
		return store.Delivery{ID: r.ID, DedupeKey: r.DedupeKey, Event: r.Event, ProjectID: r.ProjectID, ReceivedAt: r.ReceivedAt.Time}
	})
}

// DeliveryPrune implements store.IntakeQueries.
func (x executor) DeliveryPrune(ctx context.Context, before time.Time, limit int) (int64, error) {
	return queries.DeliveryPrune(ctx, x.ex, &dbsqlc.DeliveryPruneParams{Before: dbtime.Of(before), Max: int64(limit)})
}

// CallbackRequestInsertIfNew implements store.IntakeQueries.
func (x executor) CallbackRequestInsertIfNew(ctx context.Context, requestID, kind, operationID, result string, at time.Time) (bool, error) {
	n, err := queries.CallbackRequestInsertIfNew(ctx, x.ex, &dbsqlc.CallbackRequestInsertIfNewParams{RequestID: requestID,
		Kind: kind, OperationID: operationID, Result: result, ReceivedAt: dbtime.Of(at)})
	return n == 1, err
}

// CallbackRequestResult implements store.IntakeQueries.
func (x executor) CallbackRequestResult(ctx context.Context, kind, requestID string) (string, error) {
	r, err := queries.CallbackRequestResult(ctx, x.ex, &dbsqlc.CallbackRequestResultParams{Kind: kind, RequestID: requestID})
	return r, noRows(err)
}

// CallbackRequestPrune implements store.IntakeQueries.
func (x executor) CallbackRequestPrune(ctx context.Context, before time.Time, limit int) (int64, error) {
	return queries.CallbackRequestPrune(ctx, x.ex, &dbsqlc.CallbackRequestPruneParams{Before: dbtime.Of(before), Max: int64(limit)})
}

// NoteCommandClaim implements store.IntakeQueries.
func (x executor) NoteCommandClaim(ctx context.Context, n store.NoteCommand, at time.Time) (bool, error) {
	k, err := queries.NoteCommandClaim(ctx, x.ex, &dbsqlc.NoteCommandClaimParams{Platform: n.Platform,
		ProjectID: n.ProjectID, NoteID: n.NoteID, MrIid: n.MRIID, Author: n.Author, ReceivedAt: dbtime.Of(at)})
	return k == 1, err
}

// NoteCommandSetOutcome implements store.IntakeQueries.
func (x executor) NoteCommandSetOutcome(ctx context.Context, n store.NoteCommand) error {
	return queries.NoteCommandSetOutcome(ctx, x.ex, &dbsqlc.NoteCommandSetOutcomeParams{Platform: n.Platform,
		ProjectID: n.ProjectID, NoteID: n.NoteID, Outcome: n.Outcome})
}

// NoteCommandActivity implements store.IntakeQueries.
func (x executor) NoteCommandActivity(ctx context.Context, author string, since time.Time) (int64, int64, error) {
	r, err := queries.NoteCommandActivity(ctx, x.ex, &dbsqlc.NoteCommandActivityParams{Author: author, Since: dbtime.Of(since)})
	return r.Notes, r.Limited, err
}

// GitLabApprovalAdd implements store.ApprovalQueries.
func (x executor) GitLabApprovalAdd(ctx context.Context, operationID, username, source string, at time.Time) (bool, error) {
	n, err := queries.GitLabApprovalAdd(ctx, x.ex, &dbsqlc.GitLabApprovalAddParams{OperationID: operationID,
		Username: username, Source: source, ApprovedAt: dbtime.Of(at)})
	return n == 1, err
}

// GitLabApprovalRemove implements store.ApprovalQueries.
func (x executor) GitLabApprovalRemove(ctx context.Context, operationID, username string) (bool, error) {
	n, err := queries.GitLabApprovalRemove(ctx, x.ex, &dbsqlc.GitLabApprovalRemoveParams{OperationID: operationID, Username: username})
	return n == 1, err
}

// GitLabApprovalCount implements store.ApprovalQueries.
func (x executor) GitLabApprovalCount(ctx context.Context, operationID string) (int64, error) {
	return queries.GitLabApprovalCount(ctx, x.ex, operationID)
}

// GitLabApprovalClear implements store.ApprovalQueries.
func (x executor) GitLabApprovalClear(ctx context.Context, operationID string) (int64, error) {
	return queries.GitLabApprovalClear(ctx, x.ex, operationID)
}

// GitLabAccountBlockedUntil implements store.AccountQueries.
func (x executor) GitLabAccountBlockedUntil(ctx context.Context, account string) (time.Time, error) {
	until, err := queries.GitLabAccountBlockedUntil(ctx, x.ex, account)
	return until.Time, noRows(err)
}

// GitLabAccountBlock implements store.AccountQueries.
func (x executor) GitLabAccountBlock(ctx context.Context, account string, until, at time.Time) error {
	return queries.GitLabAccountBlock(ctx, x.ex, &dbsqlc.GitLabAccountBlockParams{Account: account,
		BlockedUntil: dbtime.Of(until), UpdatedAt: dbtime.Of(at)})
}

// budgetRefilled is the refilled bucket of a gitlab_account_waits row in
// SQL, over the numbered parameters of budgetTake and budgetClamp: ?1
// account, ?2 capacity, ?3 now (Unix µs), ?4 refill per µs.
const budgetRefilled = `min(?2, CASE WHEN refilled_us = 0 THEN ?2 ELSE tokens END + max(0, ?3 - CASE WHEN refilled_us = 0 THEN ?3 ELSE refilled_us END) * ?4)`

// budgetTake is GitLabBudgetTake of the PostgreSQL store, hand-written:
// sqlc's SQLite grammar has no UPDATE ... FROM, and without it sqlc types
// the repeated parameters wrongly. ?5 keep, ?6 n, ?7 now as stored text.
// SQLite's one writer makes the statement atomic.
const budgetTake = `UPDATE gitlab_account_waits SET
    tokens = ` + budgetRefilled + ` - CASE WHEN blocked_until <= ?7 AND ` + budgetRefilled + ` >= ?5 + ?6 THEN ?6 ELSE 0 END,
    granted = (blocked_until <= ?7 AND ` + budgetRefilled + ` >= ?5 + ?6),
    refilled_us = max(CASE WHEN refilled_us = 0 THEN ?3 ELSE refilled_us END, ?3)
WHERE account = ?1
RETURNING tokens, blocked_until, granted`

// budgetClamp is GitLabBudgetClamp of the PostgreSQL store (see
// budgetTake); ?5 remaining.
const budgetClamp = `UPDATE gitlab_account_waits SET
    tokens = min(?5, ` + budgetRefilled + `),
    refilled_us = max(CASE WHEN refilled_us = 0 THEN ?3 ELSE refilled_us END, ?3)
WHERE account = ?1`

// GitLabBudgetTake implements store.AccountQueries with one UPDATE …
// RETURNING (budgetTake); SQLite's one writer makes it atomic.
func (x executor) GitLabBudgetTake(ctx context.Context, p store.BudgetTakeParams) (store.BudgetTake, error) {
	var (
		tokens  float64
		until   dbtime.Time
		granted bool
	)
	err := x.ex.QueryRowContext(ctx, budgetTake, p.Account, p.Rate.Capacity, p.Now.UnixMicro(), p.Rate.PerSecond/1e6,
		p.Keep, p.N, dbtime.Of(p.Now)).Scan(&tokens, &until, &granted)
	if errors.Is(err, sql.ErrNoRows) {
		return store.BudgetTake{}, store.ErrNotFound
	}
	return store.BudgetTake{Granted: granted, Tokens: tokens, BlockedUntil: until.Time}, err
}

// GitLabBudgetEnsure implements store.AccountQueries.
func (x executor) GitLabBudgetEnsure(ctx context.Context, account string, at time.Time) error {
	return queries.GitLabBudgetEnsure(ctx, x.ex, &dbsqlc.GitLabBudgetEnsureParams{Account: account, UpdatedAt: dbtime.Of(at)})
}

// GitLabBudgetClamp implements store.AccountQueries with one UPDATE
// (budgetClamp).
func (x executor) GitLabBudgetClamp(ctx context.Context, p store.BudgetClampParams) error {
	_, err := x.ex.ExecContext(ctx, budgetClamp, p.Account, p.Rate.Capacity, p.Now.UnixMicro(), p.Rate.PerSecond/1e6, p.Remaining)
	return err
}
