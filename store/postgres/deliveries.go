package postgres

import (
	"context"
	"errors"
	"fmt"

	"changebot/store"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// InsertDelivery stores d and enqueues the job that processes it, in one
// transaction: the webhook's single database transaction on the request
// path (DESIGN §9). job receives the new delivery id. inserted is false (and
// nothing is written or enqueued) when the dedupe key was seen before.
func (s *Store) InsertDelivery(ctx context.Context, d store.Delivery, job func(id int64) river.InsertManyParams) (id int64, inserted bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO webhook_deliveries (dedupe_key, event, project_id, body, received_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (dedupe_key) DO NOTHING RETURNING id`,
			d.DedupeKey, d.Event, d.ProjectID, d.Body, s.Now()).Scan(&id)
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
	var d store.Delivery
	err := q(db).QueryRow(ctx, `SELECT id, dedupe_key, event, project_id, body, received_at, processed_at, outcome
		FROM webhook_deliveries WHERE id = $1`, id).
		Scan(&d.ID, &d.DedupeKey, &d.Event, &d.ProjectID, &d.Body, &d.ReceivedAt, &d.ProcessedAt, &d.Outcome)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Delivery{}, fmt.Errorf("reading delivery %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Delivery{}, fmt.Errorf("reading delivery %d: %w", id, err)
	}
	return d, nil
}

// MarkDeliveryProcessed records the outcome of processing a delivery.
func (s *Store) MarkDeliveryProcessed(ctx context.Context, db store.DBTX, id int64, outcome string) error {
	_, err := q(db).Exec(ctx, `UPDATE webhook_deliveries SET processed_at = $2, outcome = $3 WHERE id = $1`, id, s.Now(), outcome)
	if err != nil {
		return fmt.Errorf("marking delivery %d processed: %w", id, err)
	}
	return nil
}

// CountDeliveries returns how many deliveries are stored.
func (s *Store) CountDeliveries(ctx context.Context, db store.DBTX) (int, error) {
	var n int
	if err := q(db).QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries`).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting deliveries: %w", err)
	}
	return n, nil
}

// InsertCallbackRequest records a callback's request id of kind (approval,
// deploy, or another one-off claim such as rate_limit) in db. Request ids are
// unique per kind only (migration 0009): the systems that call back number
// their requests independently. It returns ErrDuplicate when (kind,
// requestID) was recorded before (the whole transaction should then be
// abandoned).
func (s *Store) InsertCallbackRequest(ctx context.Context, db store.DBTX, requestID, kind, operationID, result string) error {
	tag, err := q(db).Exec(ctx, `INSERT INTO callback_requests (request_id, kind, operation_id, result, received_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kind, request_id) DO NOTHING`, requestID, kind, operationID, result, s.Now())
	if err != nil {
		return fmt.Errorf("recording %s callback request %s: %w", kind, requestID, err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrDuplicate
	}
	return nil
}

// CallbackResult returns the recorded result of the callback request
// (kind, requestID); ErrNotFound when unseen.
func (s *Store) CallbackResult(ctx context.Context, db store.DBTX, kind, requestID string) (string, error) {
	var r string
	err := q(db).QueryRow(ctx, `SELECT result FROM callback_requests WHERE kind = $1 AND request_id = $2`, kind, requestID).Scan(&r)
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
	var id int64
	if err := q(db).QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM webhook_deliveries`).Scan(&id); err != nil {
		return 0, fmt.Errorf("reading the newest delivery id: %w", err)
	}
	return id, nil
}

// DeliveriesAfter returns the deliveries stored with an id above after,
// oldest first, without their bodies, at most 100.
func (s *Store) DeliveriesAfter(ctx context.Context, db store.DBTX, after int64) ([]store.Delivery, error) {
	rows, err := q(db).Query(ctx, `SELECT id, dedupe_key, event, coalesce(project_id, 0), received_at FROM webhook_deliveries
		WHERE id > $1 ORDER BY id LIMIT 100`, after)
	if err != nil {
		return nil, fmt.Errorf("reading deliveries after %d: %w", after, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Delivery, error) {
		var d store.Delivery
		err := r.Scan(&d.ID, &d.DedupeKey, &d.Event, &d.ProjectID, &d.ReceivedAt)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading deliveries after %d: %w", after, err)
	}
	return out, nil
}
