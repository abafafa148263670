package postgres

import (
	"context"
	"errors"
	"fmt"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// InsertDelivery stores d and enqueues the job that processes it, in one
// transaction: the webhook's single database transaction on the request
// path (DESIGN §9). job receives the new delivery id. inserted is false (and
// nothing is written or enqueued) when the dedupe key was seen before.
func (s *Store) InsertDelivery(ctx context.Context, d store.Delivery, job func(id int64) river.InsertManyParams) (id int64, inserted bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		id, err = queries.DeliveryInsertIfNew(ctx, tx, &dbsqlc.DeliveryInsertIfNewParams{DedupeKey: d.DedupeKey,
			Event: d.Event, ProjectID: d.ProjectID, Body: d.Body, ReceivedAt: s.Now()})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("inserting delivery: %w", err)
		}
		inserted = true
		return s.enqueue(ctx, tx, []river.InsertManyParams{job(id)})
	})
	if err != nil {
		return 0, false, fmt.Errorf("storing %s delivery: %w", d.Event, err)
	}
	return id, inserted, nil
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
		ReceivedAt: r.ReceivedAt, ProcessedAt: r.ProcessedAt, Outcome: r.Outcome}, nil
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
