package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"changebot/store"
)

// The statements of this file are hand-written (the notification
// delivery log, issue 25; migration 0020).

const notificationColumns = `destination, event, operation_id, delivery_key, state, attempts, last_status_code, last_error,
	first_attempt_at, last_attempt_at, delivered_at`

func scanNotification(row pgx.Row) (store.NotificationDelivery, error) {
	var d store.NotificationDelivery
	var delivered *time.Time
	if err := row.Scan(&d.Destination, &d.Event, &d.OperationID, &d.DeliveryKey, &d.State, &d.Attempts, &d.LastStatusCode,
		&d.LastError, &d.FirstAttemptAt, &d.LastAttemptAt, &delivered); err != nil {
		return store.NotificationDelivery{}, err
	}
	d.FirstAttemptAt, d.LastAttemptAt = d.FirstAttemptAt.UTC(), d.LastAttemptAt.UTC()
	if delivered != nil {
		d.DeliveredAt = delivered.UTC()
	}
	return d, nil
}

// NotificationRecord implements store.NotificationQueries: one upsert; a
// concurrent attempt of the same delivery waits on the row's lock.
func (x executor) NotificationRecord(ctx context.Context, a store.NotificationAttempt, now time.Time) (store.NotificationDelivery, error) {
	return scanNotification(x.q.QueryRow(ctx, `INSERT INTO notification_deliveries
			(destination, delivery_key, event, operation_id, state, attempts, last_status_code, last_error,
			 first_attempt_at, last_attempt_at, delivered_at)
		VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, $8, CASE WHEN $5 = 'delivered' THEN $8::timestamptz END)
		ON CONFLICT (destination, delivery_key) DO UPDATE SET
			attempts = notification_deliveries.attempts + 1,
			state = CASE WHEN notification_deliveries.state = 'delivered' THEN 'delivered' ELSE excluded.state END,
			last_status_code = excluded.last_status_code, last_error = excluded.last_error,
			last_attempt_at = excluded.last_attempt_at,
			delivered_at = coalesce(notification_deliveries.delivered_at, excluded.delivered_at)
		RETURNING `+notificationColumns,
		a.Destination, a.DeliveryKey, a.Event, a.OperationID, a.State, a.StatusCode, a.Error, now))
}

// NotificationList implements store.NotificationQueries (index
// notification_deliveries_operation when an operation is given).
func (x executor) NotificationList(ctx context.Context, p store.NotificationListParams) ([]store.NotificationDelivery, error) {
	rows, err := x.q.Query(ctx, `SELECT `+notificationColumns+` FROM notification_deliveries
		WHERE ($1 = '' OR operation_id = $1) AND ($2 = '' OR destination = $2)
		ORDER BY first_attempt_at DESC, destination, delivery_key
		LIMIT $3`, p.OperationID, p.Destination, limit(p.Limit))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.NotificationDelivery
	for rows.Next() {
		d, err := scanNotification(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
