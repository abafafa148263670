package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"changebot/store"
	"changebot/store/sqlite/internal/dbsqlc"
	"changebot/store/sqlite/internal/dbtime"
)

// WriteConcurrency is 1: SQLite has one writer at a time (a second write
// transaction waits for the lock), so the webhook intake commits its
// batches one after the other (webhooks' group commit asks it).
func (s *Store) WriteConcurrency() int { return 1 }

// InsertDelivery implements store.Intake (InsertDeliveries of one delivery).
func (s *Store) InsertDelivery(ctx context.Context, d store.Delivery, job func(id int64) river.InsertManyParams) (id int64, inserted bool, err error) {
	out, err := s.InsertDeliveries(ctx, []store.Delivery{d}, job)
	if err != nil {
		return 0, false, err
	}
	return out[0].ID, out[0].Inserted, nil
}

// InsertDeliveries implements store.Intake: one multi-row INSERT … ON
// CONFLICT DO NOTHING RETURNING of the new keys (stored dispatched) and one
// River InsertManyTx, in one transaction. The webhook intake stores through
// it on SQLite: one writer and no network round trip, so the transaction
// costs what one autocommit INSERT would (BENCHMARKS.md, intake).
func (s *Store) InsertDeliveries(ctx context.Context, ds []store.Delivery, job func(id int64) river.InsertManyParams) ([]store.DeliveryInsert, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	var out []store.DeliveryInsert
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var ids []int64
		var err error
		out, ids, err = s.insertDeliveries(ctx, tx, ds, true)
		if err != nil {
			return err
		}
		jobs := make([]river.InsertManyParams, 0, len(ids))
		for _, id := range ids {
			jobs = append(jobs, job(id))
		}
		return s.enqueue(ctx, tx, jobs)
	})
	if err != nil {
		return nil, fmt.Errorf("storing %d deliveries (%s first): %w", len(ds), ds[0].Event, err)
	}
	return out, nil
}

// StoreDeliveries implements store.Intake: the INSERT of InsertDeliveries
// alone, in a transaction of its own, its rows left for DispatchDeliveries.
func (s *Store) StoreDeliveries(ctx context.Context, ds []store.Delivery) ([]store.DeliveryInsert, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	var out []store.DeliveryInsert
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, _, err = s.insertDeliveries(ctx, tx, ds, false)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("storing %d deliveries (%s first): %w", len(ds), ds[0].Event, err)
	}
	return out, nil
}

// insertDeliveries runs the batch INSERT of ds in tx and answers each
// delivery, with the ids stored in ds's order.
func (s *Store) insertDeliveries(ctx context.Context, tx *sql.Tx, ds []store.Delivery, dispatched bool) ([]store.DeliveryInsert, []int64, error) {
	// Hand-written: sqlc's SQLite engine cannot repeat a VALUES row for a
	// slice. Every value is bound; six per row stays far below SQLite's
	// 32,766 parameters for any batch the intake makes.
	first := store.FirstOfKey(ds)
	now := dbtime.Of(s.Now())
	var dispatchedAt *dbtime.Time
	if dispatched {
		dispatchedAt = &now
	}
	var query strings.Builder
	query.WriteString(`INSERT INTO webhook_deliveries (dedupe_key, event, project_id, body, received_at, dispatched_at) VALUES `)
	args := make([]any, 0, 6*len(ds))
	for i, d := range ds {
		if first[i] != i {
			continue
		}
		if len(args) > 0 {
			query.WriteString(", ")
		}
		query.WriteString("(?, ?, ?, ?, ?, ?)")
		args = append(args, d.DedupeKey, d.Event, d.ProjectID, d.Body, now, dispatchedAt)
	}
	query.WriteString(` ON CONFLICT (dedupe_key) DO NOTHING RETURNING id, dedupe_key`)
	ids, err := insertedIDs(ctx, tx, query.String(), args)
	if err != nil {
		return nil, nil, fmt.Errorf("inserting %d deliveries: %w", len(args)/6, err)
	}
	out := make([]store.DeliveryInsert, len(ds))
	stored := make([]int64, 0, len(ids))
	for i, d := range ds {
		if id, ok := ids[d.DedupeKey]; ok && first[i] == i {
			out[i] = store.DeliveryInsert{ID: id, Inserted: true}
			stored = append(stored, id)
		}
	}
	return out, stored, nil
}

// DispatchDeliveries implements store.Intake: in one transaction (SQLite's
// one writer keeps two dispatchers from taking the same rows), the oldest
// undispatched deliveries, at most max, get their jobs and are marked
// dispatched.
func (s *Store) DispatchDeliveries(ctx context.Context, max int, job func(id int64) river.InsertManyParams) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		g := tx
		ids, err := queries.DeliveryListUndispatched(ctx, g, int64(max))
		if err != nil {
			return fmt.Errorf("reading undispatched deliveries: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		jobs := make([]river.InsertManyParams, 0, len(ids))
		for _, id := range ids {
			jobs = append(jobs, job(id))
		}
		if err := s.enqueue(ctx, tx, jobs); err != nil {
			return err
		}
		now := dbtime.Of(s.Now())
		for _, id := range ids {
			if err := queries.DeliveryMarkDispatched(ctx, g, &dbsqlc.DeliveryMarkDispatchedParams{DispatchedAt: &now, ID: id}); err != nil {
				return fmt.Errorf("marking delivery %d dispatched: %w", id, err)
			}
		}
		n = len(ids)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("dispatching deliveries: %w", err)
	}
	return n, nil
}

// insertedIDs runs query (… RETURNING id, dedupe_key) and maps each
// returned key to its id.
func insertedIDs(ctx context.Context, tx *sql.Tx, query string, args []any) (map[string]int64, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
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

// GetDelivery implements store.Intake.
func (s *Store) GetDelivery(ctx context.Context, db store.DBTX, id int64) (store.Delivery, error) {
	g, err := q(db).gen()
	if err != nil {
		return store.Delivery{}, err
	}
	r, err := queries.DeliveryGet(ctx, g, id)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Delivery{}, fmt.Errorf("reading delivery %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Delivery{}, fmt.Errorf("reading delivery %d: %w", id, err)
	}
	d := store.Delivery{ID: r.ID, DedupeKey: r.DedupeKey, Event: r.Event, ProjectID: r.ProjectID, Body: r.Body,
		ReceivedAt: r.ReceivedAt.Time, Outcome: r.Outcome}
	if r.ProcessedAt != nil {
		d.ProcessedAt = &r.ProcessedAt.Time
	}
	if r.DispatchedAt != nil {
		d.DispatchedAt = &r.DispatchedAt.Time
	}
	return d, nil
}

// MarkDeliveryProcessed implements store.Intake.
func (s *Store) MarkDeliveryProcessed(ctx context.Context, db store.DBTX, id int64, outcome string) error {
	g, err := q(db).gen()
	if err != nil {
		return err
	}
	now := dbtime.Of(s.Now())
	if err := queries.DeliveryMarkProcessed(ctx, g, &dbsqlc.DeliveryMarkProcessedParams{ID: id, ProcessedAt: &now, Outcome: outcome}); err != nil {
		return fmt.Errorf("marking delivery %d processed: %w", id, err)
	}
	return nil
}

// CountDeliveries implements store.Intake.
func (s *Store) CountDeliveries(ctx context.Context, db store.DBTX) (int, error) {
	g, err := q(db).gen()
	if err != nil {
		return 0, err
	}
	n, err := queries.DeliveryCount(ctx, g)
	if err != nil {
		return 0, fmt.Errorf("counting deliveries: %w", err)
	}
	return int(n), nil
}

// LastDeliveryID implements store.Intake.
func (s *Store) LastDeliveryID(ctx context.Context, db store.DBTX) (int64, error) {
	g, err := q(db).gen()
	if err != nil {
		return 0, err
	}
	id, err := queries.DeliveryLastID(ctx, g)
	if err != nil {
		return 0, fmt.Errorf("reading the newest delivery id: %w", err)
	}
	return id, nil
}

// DeliveriesAfter implements store.Intake.
func (s *Store) DeliveriesAfter(ctx context.Context, db store.DBTX, after int64) ([]store.Delivery, error) {
	g, err := q(db).gen()
	if err != nil {
		return nil, err
	}
	rows, err := queries.DeliveryListAfter(ctx, g, after)
	if err != nil {
		return nil, fmt.Errorf("reading deliveries after %d: %w", after, err)
	}
	var out []store.Delivery
	for _, r := range rows {
		out = append(out, store.Delivery{ID: r.ID, DedupeKey: r.DedupeKey, Event: r.Event, ProjectID: r.ProjectID, ReceivedAt: r.ReceivedAt.Time})
	}
	return out, nil
}

// InsertCallbackRequest implements store.Intake.
func (s *Store) InsertCallbackRequest(ctx context.Context, db store.DBTX, requestID, kind, operationID, result string) error {
	g, err := q(db).gen()
	if err != nil {
		return err
	}
	n, err := queries.CallbackRequestInsertIfNew(ctx, g, &dbsqlc.CallbackRequestInsertIfNewParams{RequestID: requestID,
		Kind: kind, OperationID: operationID, Result: result, ReceivedAt: dbtime.Of(s.Now())})
	if err != nil {
		return fmt.Errorf("recording %s callback request %s: %w", kind, requestID, err)
	}
	if n == 0 {
		return store.ErrDuplicate
	}
	return nil
}

// CallbackResult implements store.Intake.
func (s *Store) CallbackResult(ctx context.Context, db store.DBTX, kind, requestID string) (string, error) {
	g, err := q(db).gen()
	if err != nil {
		return "", err
	}
	r, err := queries.CallbackRequestResult(ctx, g, &dbsqlc.CallbackRequestResultParams{Kind: kind, RequestID: requestID})
	if errors.Is(err, sql.ErrNoRows) {
		return "", store.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading %s callback request %s: %w", kind, requestID, err)
	}
	return r, nil
}

// ClaimNote implements store.Intake.
func (s *Store) ClaimNote(ctx context.Context, db store.DBTX, platform string, projectID, noteID, iid int64, author string) (bool, error) {
	g, err := q(db).gen()
	if err != nil {
		return false, err
	}
	n, err := queries.NoteCommandClaim(ctx, g, &dbsqlc.NoteCommandClaimParams{Platform: store.PlatformOr(platform), ProjectID: projectID, NoteID: noteID,
		MrIid: iid, Author: author, ReceivedAt: dbtime.Of(s.Now())})
	if err != nil {
		return false, fmt.Errorf("claiming note %d: %w", noteID, err)
	}
	return n == 1, nil
}

// SetNoteOutcome implements store.Intake.
func (s *Store) SetNoteOutcome(ctx context.Context, db store.DBTX, platform string, projectID, noteID int64, outcome string) error {
	g, err := q(db).gen()
	if err != nil {
		return err
	}
	if err := queries.NoteCommandSetOutcome(ctx, g, &dbsqlc.NoteCommandSetOutcomeParams{Platform: store.PlatformOr(platform), ProjectID: projectID, NoteID: noteID, Outcome: outcome}); err != nil {
		return fmt.Errorf("recording outcome of note %d: %w", noteID, err)
	}
	return nil
}

// NoteActivity implements store.Intake.
func (s *Store) NoteActivity(ctx context.Context, db store.DBTX, author string, since time.Time) (notes, limited int, err error) {
	g, err := q(db).gen()
	if err != nil {
		return 0, 0, err
	}
	r, err := queries.NoteCommandActivity(ctx, g, &dbsqlc.NoteCommandActivityParams{Author: author, Since: dbtime.Of(since)})
	if err != nil {
		return 0, 0, fmt.Errorf("counting notes of %s: %w", author, err)
	}
	return int(r.Notes), int(r.Limited), nil
}

// PruneIntake implements store.Intake.
func (s *Store) PruneIntake(ctx context.Context, table string, before time.Time, limit int) (int64, error) {
	var n int64
	var err error
	switch table {
	case store.TableWebhookDeliveries:
		n, err = queries.DeliveryPrune(ctx, s.db, &dbsqlc.DeliveryPruneParams{Before: dbtime.Of(before), Max: int64(limit)})
	case store.TableCallbackRequests:
		n, err = queries.CallbackRequestPrune(ctx, s.db, &dbsqlc.CallbackRequestPruneParams{Before: dbtime.Of(before), Max: int64(limit)})
	default:
		return 0, fmt.Errorf("pruning %q: not an intake table", table)
	}
	if err != nil {
		return 0, fmt.Errorf("pruning %s received before %s: %w", table, before.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}

// AddGitLabApproval implements store.Approvals.
func (s *Store) AddGitLabApproval(ctx context.Context, db store.DBTX, operationID, username, source string) (added bool, count int, err error) {
	g, err := q(db).gen()
	if err != nil {
		return false, 0, err
	}
	n, err := queries.GitLabApprovalAdd(ctx, g, &dbsqlc.GitLabApprovalAddParams{OperationID: operationID,
		Username: username, Source: source, ApprovedAt: dbtime.Of(s.Now())})
	if err != nil {
		return false, 0, fmt.Errorf("recording approval of %s by %s: %w", operationID, username, err)
	}
	if count, err = s.CountGitLabApprovals(ctx, db, operationID); err != nil {
		return false, 0, err
	}
	return n == 1, count, nil
}

// RemoveGitLabApproval implements store.Approvals.
func (s *Store) RemoveGitLabApproval(ctx context.Context, db store.DBTX, operationID, username string) (bool, error) {
	g, err := q(db).gen()
	if err != nil {
		return false, err
	}
	n, err := queries.GitLabApprovalRemove(ctx, g, &dbsqlc.GitLabApprovalRemoveParams{OperationID: operationID, Username: username})
	if err != nil {
		return false, fmt.Errorf("removing approval of %s by %s: %w", operationID, username, err)
	}
	return n == 1, nil
}

// CountGitLabApprovals implements store.Approvals.
func (s *Store) CountGitLabApprovals(ctx context.Context, db store.DBTX, operationID string) (int, error) {
	g, err := q(db).gen()
	if err != nil {
		return 0, err
	}
	n, err := queries.GitLabApprovalCount(ctx, g, operationID)
	if err != nil {
		return 0, fmt.Errorf("counting approvals of %s: %w", operationID, err)
	}
	return int(n), nil
}

// ClearGitLabApprovals implements store.Approvals.
func (s *Store) ClearGitLabApprovals(ctx context.Context, db store.DBTX, operationID string) (int, error) {
	g, err := q(db).gen()
	if err != nil {
		return 0, err
	}
	n, err := queries.GitLabApprovalClear(ctx, g, operationID)
	if err != nil {
		return 0, fmt.Errorf("clearing approvals of %s: %w", operationID, err)
	}
	return int(n), nil
}

// AccountBlockedUntil implements store.AccountWaits.
func (s *Store) AccountBlockedUntil(ctx context.Context, account string) (time.Time, error) {
	until, err := queries.GitLabAccountBlockedUntil(ctx, s.db, account)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the wait of gitlab account %s: %w", account, err)
	}
	return until.Time, nil
}

// BlockAccountUntil implements store.AccountWaits.
func (s *Store) BlockAccountUntil(ctx context.Context, account string, until time.Time) error {
	err := queries.GitLabAccountBlock(ctx, s.db, &dbsqlc.GitLabAccountBlockParams{Account: account,
		BlockedUntil: dbtime.Of(until), UpdatedAt: dbtime.Of(s.Now())})
	if err != nil {
		return fmt.Errorf("recording the wait of gitlab account %s: %w", account, err)
	}
	return nil
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

// TakeAccountBudget implements store.AccountWaits with one UPDATE of the
// account's row (created on the first take).
func (s *Store) TakeAccountBudget(ctx context.Context, p store.BudgetTakeParams) (store.BudgetTake, error) {
	take := func() (store.BudgetTake, error) {
		var (
			tokens  float64
			until   dbtime.Time
			granted bool
		)
		err := s.db.QueryRowContext(ctx, budgetTake, p.Account, p.Rate.Capacity, p.Now.UnixMicro(), p.Rate.PerSecond/1e6,
			p.Keep, p.N, dbtime.Of(p.Now)).Scan(&tokens, &until, &granted)
		return store.BudgetTake{Granted: granted, Tokens: tokens, BlockedUntil: until.Time}, err
	}
	out, err := take()
	if errors.Is(err, sql.ErrNoRows) {
		if err = queries.GitLabBudgetEnsure(ctx, s.db, &dbsqlc.GitLabBudgetEnsureParams{Account: p.Account,
			UpdatedAt: dbtime.Of(s.Now())}); err == nil {
			out, err = take()
		}
	}
	if err != nil {
		return store.BudgetTake{}, fmt.Errorf("taking from the call budget of gitlab account %s: %w", p.Account, err)
	}
	return out, nil
}

// ClampAccountBudget implements store.AccountWaits: one UPDATE.
func (s *Store) ClampAccountBudget(ctx context.Context, p store.BudgetClampParams) error {
	_, err := s.db.ExecContext(ctx, budgetClamp, p.Account, p.Rate.Capacity, p.Now.UnixMicro(), p.Rate.PerSecond/1e6, p.Remaining)
	if err != nil {
		return fmt.Errorf("lowering the call budget of gitlab account %s: %w", p.Account, err)
	}
	return nil
}
