package sqlite

import (
	"context"
	"time"

	"changebot/store"
)

// The statements of this file are hand-written (the notification
// delivery log, issue 25; migration 0008). Writers are serialised, so the
// upsert needs no lock of its own.

const notificationColumns = `destination, event, operation_id, delivery_key, state, attempts, last_status_code, last_error,
	first_attempt_at, last_attempt_at, delivered_at`

// notificationDest are the scan targets of notificationColumns.
func notificationDest(d *store.NotificationDelivery) []any {
	return []any{&d.Destination, &d.Event, &d.OperationID, &d.DeliveryKey, &d.State, &d.Attempts, &d.LastStatusCode,
		&d.LastError, tm{&d.FirstAttemptAt}, tm{&d.LastAttemptAt}, tm{&d.DeliveredAt}}
}

// NotificationRecord implements store.NotificationQueries.
func (x executor) NotificationRecord(ctx context.Context, a store.NotificationAttempt, now time.Time) (store.NotificationDelivery, error) {
	var delivered *time.Time
	if a.State == store.NotificationDelivered {
		delivered = &now
	}
	var d store.NotificationDelivery
	err := x.queryRow(ctx, `INSERT INTO notification_deliveries
			(destination, delivery_key, event, operation_id, state, attempts, last_status_code, last_error,
			 first_attempt_at, last_attempt_at, delivered_at)
		VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?8, ?9)
		ON CONFLICT (destination, delivery_key) DO UPDATE SET
			attempts = notification_deliveries.attempts + 1,
			state = CASE WHEN notification_deliveries.state = 'delivered' THEN 'delivered' ELSE excluded.state END,
			last_status_code = excluded.last_status_code, last_error = excluded.last_error,
			last_attempt_at = excluded.last_attempt_at,
			delivered_at = coalesce(notification_deliveries.delivered_at, excluded.delivered_at)
		RETURNING `+notificationColumns,
		a.Destination, a.DeliveryKey, a.Event, a.OperationID, a.State, a.StatusCode, a.Error, now, delivered).Scan(notificationDest(&d)...)
	return d, err
}

// NotificationList implements store.NotificationQueries.
func (x executor) NotificationList(ctx context.Context, p store.NotificationListParams) ([]store.NotificationDelivery, error) {
	rows, err := x.query(ctx, `SELECT `+notificationColumns+` FROM notification_deliveries
		WHERE (?1 = '' OR operation_id = ?1) AND (?2 = '' OR destination = ?2)
		ORDER BY first_attempt_at DESC, destination, delivery_key
		LIMIT ?3`, p.OperationID, p.Destination, p.Limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.NotificationDelivery
	for rows.Next() {
		var d store.NotificationDelivery
		if err := rows.Scan(notificationDest(&d)...); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
