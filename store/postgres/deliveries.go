package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"
)

// DeliveryInsertMany implements store.IntakeQueries with one INSERT …
// SELECT unnest(…) ON CONFLICT DO NOTHING RETURNING. Rows go in in key
// order: two batches holding the same keys (two replicas, a resend racing
// its original) then wait on each other's unique index entries in one
// order, never in a cycle (40P01, seen in the contract's concurrent case
// before the sort).
func (x executor) DeliveryInsertMany(ctx context.Context, ds []store.Delivery, receivedAt time.Time, dispatched bool) (map[string]int64, error) {
	sorted := slices.SortedFunc(slices.Values(ds), func(a, b store.Delivery) int { return strings.Compare(a.DedupeKey, b.DedupeKey) })
	p := &dbsqlc.DeliveryInsertManyIfNewParams{ReceivedAt: receivedAt, Dispatched: dispatched}
	for _, d := range sorted {
		p.DedupeKeys = append(p.DedupeKeys, d.DedupeKey)
		p.Events = append(p.Events, d.Event)
		p.ProjectIds = append(p.ProjectIds, d.ProjectID)
		p.Bodies = append(p.Bodies, d.Body)
	}
	rows, err := queries.DeliveryInsertManyIfNew(ctx, x.q, p)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]int64, len(rows))
	for _, r := range rows {
		ids[r.DedupeKey] = r.ID
	}
	return ids, nil
}

// DeliveryLockUndispatched implements store.IntakeQueries: SELECT … FOR
// UPDATE SKIP LOCKED.
func (x executor) DeliveryLockUndispatched(ctx context.Context, n int) ([]int64, error) {
	return queries.DeliveryLockUndispatched(ctx, x.q, limit(n))
}

// DeliveryMarkDispatched implements store.IntakeQueries: one UPDATE … WHERE
// id = ANY(ids).
func (x executor) DeliveryMarkDispatched(ctx context.Context, ids []int64, at time.Time) error {
	return queries.DeliveryMarkDispatched(ctx, x.q, &dbsqlc.DeliveryMarkDispatchedParams{DispatchedAt: at, Ids: ids})
}

// DeliveryGet implements store.IntakeQueries.
func (x executor) DeliveryGet(ctx context.Context, id int64) (store.Delivery, error) {
	r, err := queries.DeliveryGet(ctx, x.q, id)
	if err != nil {
		return store.Delivery{}, noRows(err)
	}
	return store.Delivery{ID: r.ID, DedupeKey: r.DedupeKey, Event: r.Event, ProjectID: r.ProjectID, Body: r.Body,
		ReceivedAt: r.ReceivedAt, ProcessedAt: r.ProcessedAt, Outcome: r.Outcome, DispatchedAt: r.DispatchedAt}, nil
}

// DeliveryMarkProcessed implements store.IntakeQueries.
func (x executor) DeliveryMarkProcessed(ctx context.Context, id int64, outcome string, at time.Time) error {
	return queries.DeliveryMarkProcessed(ctx, x.q, &dbsqlc.DeliveryMarkProcessedParams{ID: id, ProcessedAt: &at, Outcome: outcome})
}

// DeliveryCount implements store.IntakeQueries.
func (x executor) DeliveryCount(ctx context.Context) (int64, error) {
	return queries.DeliveryCount(ctx, x.q)
}

// DeliveryLastID implements store.IntakeQueries.
func (x executor) DeliveryLastID(ctx context.Context) (int64, error) {
	return queries.DeliveryLastID(ctx, x.q)
}

// DeliveryListAfter implements store.IntakeQueries.
func (x executor) DeliveryListAfter(ctx context.Context, after int64) ([]store.Delivery, error) {
	rows, err := queries.DeliveryListAfter(ctx, x.q, after)
	if err != nil {
		return nil, err
	}
	out := make([]store.Delivery, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.Delivery{ID: r.ID, DedupeKey: r.DedupeKey, Event: r.Event, ProjectID: r.ProjectID, ReceivedAt: r.ReceivedAt})
	}
	return out, nil
}

// DeliveryPrune implements store.IntakeQueries.
func (x executor) DeliveryPrune(ctx context.Context, before time.Time, n int) (int64, error) {
	return queries.DeliveryPrune(ctx, x.q, &dbsqlc.DeliveryPruneParams{Before: before, Max: limit(n)})
}

// CallbackRequestInsertIfNew implements store.IntakeQueries.
func (x executor) CallbackRequestInsertIfNew(ctx context.Context, requestID, kind, operationID, result string, at time.Time) (bool, error) {
	n, err := queries.CallbackRequestInsertIfNew(ctx, x.q, &dbsqlc.CallbackRequestInsertIfNewParams{RequestID: requestID,
		Kind: kind, OperationID: operationID, Result: result, ReceivedAt: at})
	return n == 1, err
}

// CallbackRequestResult implements store.IntakeQueries.
func (x executor) CallbackRequestResult(ctx context.Context, kind, requestID string) (string, error) {
	r, err := queries.CallbackRequestResult(ctx, x.q, &dbsqlc.CallbackRequestResultParams{Kind: kind, RequestID: requestID})
	return r, noRows(err)
}

// CallbackRequestPrune implements store.IntakeQueries.
func (x executor) CallbackRequestPrune(ctx context.Context, before time.Time, n int) (int64, error) {
	return queries.CallbackRequestPrune(ctx, x.q, &dbsqlc.CallbackRequestPruneParams{Before: before, Max: limit(n)})
}

// NoteCommandClaim implements store.IntakeQueries.
func (x executor) NoteCommandClaim(ctx context.Context, n store.NoteCommand, at time.Time) (bool, error) {
	k, err := queries.NoteCommandClaim(ctx, x.q, &dbsqlc.NoteCommandClaimParams{Platform: n.Platform, ProjectID: n.ProjectID,
		NoteID: n.NoteID, MrIid: n.MRIID, Author: n.Author, ReceivedAt: at})
	return k == 1, err
}

// NoteCommandSetOutcome implements store.IntakeQueries.
func (x executor) NoteCommandSetOutcome(ctx context.Context, n store.NoteCommand) error {
	return queries.NoteCommandSetOutcome(ctx, x.q, &dbsqlc.NoteCommandSetOutcomeParams{Platform: n.Platform,
		ProjectID: n.ProjectID, NoteID: n.NoteID, Outcome: n.Outcome})
}

// NoteCommandActivity implements store.IntakeQueries.
func (x executor) NoteCommandActivity(ctx context.Context, author string, since time.Time) (int64, int64, error) {
	r, err := queries.NoteCommandActivity(ctx, x.q, &dbsqlc.NoteCommandActivityParams{Author: author, Since: since})
	return r.Notes, r.Limited, err
}
