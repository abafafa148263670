package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// InsertDelivery stores d and enqueues the job that processes it, in one
// transaction (InsertDeliveries of one delivery). job receives the new
// delivery id. inserted is false (and nothing is written or enqueued) when
// the dedupe key was seen before.
func (s *Store) InsertDelivery(ctx context.Context, d store.Delivery, job func(id int64) river.InsertManyParams) (id int64, inserted bool, err error) {
	out, err := s.InsertDeliveries(ctx, []store.Delivery{d}, job)
	if err != nil {
		return 0, false, err
	}
	return out[0].ID, out[0].Inserted, nil
}

// InsertDeliveries stores the deliveries of ds whose dedupe key is new
// with one INSERT … SELECT unnest(…) ON CONFLICT DO NOTHING, and enqueues
// job(id) for each one stored with one River InsertManyTx, in one
// transaction (stored dispatched). out[i] answers ds[i]; a later copy of a
// key within ds is a duplicate of the first (store.FirstOfKey). On an error
// nothing is stored or enqueued, unless the error is the commit's answer
// being lost (a resend then answers duplicate).
func (s *Store) InsertDeliveries(ctx context.Context, ds []store.Delivery, job func(id int64) river.InsertManyParams) ([]store.DeliveryInsert, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	var out []store.DeliveryInsert
	err := s.inTx(ctx, func(tx pgx.Tx) error {
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

// StoreDeliveries stores the deliveries of ds whose dedupe key is new with
// one autocommit INSERT … SELECT unnest(…) ON CONFLICT DO NOTHING: one
// durable round trip, the webhook intake's request path on PostgreSQL
// (issue 12). Their jobs are not enqueued: DispatchDeliveries does that
// (dispatched_at NULL until then, migration 0018). out[i] answers ds[i] as
// InsertDeliveries' does; on an error nothing is stored, unless the error
// is the commit's answer being lost (a resend then answers duplicate).
func (s *Store) StoreDeliveries(ctx context.Context, ds []store.Delivery) ([]store.DeliveryInsert, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	out, _, err := s.insertDeliveries(ctx, s.pool, ds, false)
	if err != nil {
		return nil, fmt.Errorf("storing %d deliveries (%s first): %w", len(ds), ds[0].Event, err)
	}
	return out, nil
}

// insertDeliveries runs the batch INSERT of ds in db and answers each
// delivery, with the ids stored in ds's order.
func (s *Store) insertDeliveries(ctx context.Context, db dbsqlc.DBTX, ds []store.Delivery, dispatched bool) ([]store.DeliveryInsert, []int64, error) {
	first := store.FirstOfKey(ds)
	// Rows go in in key order: two batches holding the same keys (two
	// replicas, a resend racing its original) then wait on each other's
	// unique index entries in one order, never in a cycle (40P01, seen in
	// the contract's concurrent case before the sort).
	order := make([]int, 0, len(ds))
	for i := range ds {
		if first[i] == i {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(ds[a].DedupeKey, ds[b].DedupeKey) })
	p := &dbsqlc.DeliveryInsertManyIfNewParams{ReceivedAt: s.Now(), Dispatched: dispatched}
	for _, i := range order {
		d := ds[i]
		p.DedupeKeys = append(p.DedupeKeys, d.DedupeKey)
		p.Events = append(p.Events, d.Event)
		p.ProjectIds = append(p.ProjectIds, d.ProjectID)
		p.Bodies = append(p.Bodies, d.Body)
	}
	rows, err := queries.DeliveryInsertManyIfNew(ctx, db, p)
	if err != nil {
		return nil, nil, fmt.Errorf("inserting %d deliveries: %w", len(p.DedupeKeys), err)
	}
	ids := make(map[string]int64, len(rows))
	for _, r := range rows {
		ids[r.DedupeKey] = r.ID
	}
	out := make([]store.DeliveryInsert, len(ds))
	stored := make([]int64, 0, len(rows))
	for i, d := range ds {
		if id, ok := ids[d.DedupeKey]; ok && first[i] == i {
			out[i] = store.DeliveryInsert{ID: id, Inserted: true}
			stored = append(stored, id)
		}
	}
	return out, stored, nil
}

// DispatchDeliveries enqueues job(id) for at most max stored deliveries
// whose jobs are not enqueued yet (StoreDeliveries), oldest first, and
// marks them dispatched, in one transaction: the rows are selected FOR
// UPDATE SKIP LOCKED, so dispatchers of several replicas running at once
// take disjoint rows and each delivery's job is enqueued once. It returns
// how many it enqueued (below max: none are left, or other dispatchers
// hold them).
func (s *Store) DispatchDeliveries(ctx context.Context, max int, job func(id int64) river.InsertManyParams) (int, error) {
	n := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		ids, err := queries.DeliveryLockUndispatched(ctx, tx, int32(max))
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
		if err := queries.DeliveryMarkDispatched(ctx, tx, &dbsqlc.DeliveryMarkDispatchedParams{DispatchedAt: s.Now(), Ids: ids}); err != nil {
			return fmt.Errorf("marking %d deliveries dispatched: %w", len(ids), err)
		}
		n = len(ids)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("dispatching deliveries: %w", err)
	}
	return n, nil
}

// GetDelivery reads one delivery; ErrNotFound when there is none.
func (s *Store) GetDelivery(ctx context.Context, db store.DBTX, id int64) (store.Delivery, error) {
	r, err := queries.DeliveryGet(ctx, q(db), id)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Delivery{}, fmt.Errorf("reading delivery %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Delivery{}, fmt.Errorf("reading delivery %d: %w", id, err)
	}
	return store.Delivery{ID: r.ID, DedupeKey: r.DedupeKey, Event: r.Event, ProjectID: r.ProjectID, Body: r.Body,
		ReceivedAt: r.ReceivedAt, ProcessedAt: r.ProcessedAt, Outcome: r.Outcome, DispatchedAt: r.DispatchedAt}, nil
}

// MarkDeliveryProcessed records the outcome of processing a delivery.
func (s *Store) MarkDeliveryProcessed(ctx context.Context, db store.DBTX, id int64, outcome string) error {
	now := s.Now()
	err := queries.DeliveryMarkProcessed(ctx, q(db), &dbsqlc.DeliveryMarkProcessedParams{ID: id, ProcessedAt: &now, Outcome: outcome})
	if err != nil {
		return fmt.Errorf("marking delivery %d processed: %w", id, err)
	}
	return nil
}

// CountDeliveries returns how many deliveries are stored.
func (s *Store) CountDeliveries(ctx context.Context, db store.DBTX) (int, error) {
	n, err := queries.DeliveryCount(ctx, q(db))
	if err != nil {
		return 0, fmt.Errorf("counting deliveries: %w", err)
	}
	return int(n), nil
}

// InsertCallbackRequest records a callback's request id of kind (approval,
// deploy, or another one-off claim such as rate_limit) in db. Request ids are
// unique per kind only (migration 0009): the systems that call back number
// their requests independently. It returns ErrDuplicate when (kind,
// requestID) was recorded before (the whole transaction should then be
// abandoned).
func (s *Store) InsertCallbackRequest(ctx context.Context, db store.DBTX, requestID, kind, operationID, result string) error {
	n, err := queries.CallbackRequestInsertIfNew(ctx, q(db), &dbsqlc.CallbackRequestInsertIfNewParams{RequestID: requestID,
		Kind: kind, OperationID: operationID, Result: result, ReceivedAt: s.Now()})
	if err != nil {
		return fmt.Errorf("recording %s callback request %s: %w", kind, requestID, err)
	}
	if n == 0 {
		return store.ErrDuplicate
	}
	return nil
}

// CallbackResult returns the recorded result of the callback request
// (kind, requestID); ErrNotFound when unseen.
func (s *Store) CallbackResult(ctx context.Context, db store.DBTX, kind, requestID string) (string, error) {
	r, err := queries.CallbackRequestResult(ctx, q(db), &dbsqlc.CallbackRequestResultParams{Kind: kind, RequestID: requestID})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", store.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading %s callback request %s: %w", kind, requestID, err)
	}
	return r, nil
}

// LastDeliveryID returns the id of the newest stored delivery, 0 when there
// is none. With DeliveriesAfter it tells which deliveries arrived in a
// window without comparing clocks.
func (s *Store) LastDeliveryID(ctx context.Context, db store.DBTX) (int64, error) {
	id, err := queries.DeliveryLastID(ctx, q(db))
	if err != nil {
		return 0, fmt.Errorf("reading the newest delivery id: %w", err)
	}
	return id, nil
}

// DeliveriesAfter returns the deliveries stored with an id above after,
// oldest first, without their bodies, at most 100.
func (s *Store) DeliveriesAfter(ctx context.Context, db store.DBTX, after int64) ([]store.Delivery, error) {
	rows, err := queries.DeliveryListAfter(ctx, q(db), after)
	if err != nil {
		return nil, fmt.Errorf("reading deliveries after %d: %w", after, err)
	}
	out := make([]store.Delivery, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.Delivery{ID: r.ID, DedupeKey: r.DedupeKey, Event: r.Event, ProjectID: r.ProjectID, ReceivedAt: r.ReceivedAt})
	}
	return out, nil
}
