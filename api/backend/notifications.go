package backend

import (
	"context"

	"changebot/api"
	"changebot/store"
)

// NotificationStore is what Notifications reads: the store's delivery log.
type NotificationStore interface {
	DB() store.DBTX
	ListNotificationDeliveries(ctx context.Context, db store.DBTX, p store.NotificationListParams) ([]store.NotificationDelivery, error)
}

// Notifications is api.Notifications over the store's delivery log.
type Notifications struct {
	Store NotificationStore
}

var _ api.Notifications = Notifications{}

// ListNotifications implements api.Notifications.
func (n Notifications) ListNotifications(ctx context.Context, f api.NotificationFilter) ([]api.NotificationDelivery, error) {
	ds, err := n.Store.ListNotificationDeliveries(ctx, n.Store.DB(), store.NotificationListParams{
		OperationID: f.OperationID, Destination: f.Destination, Limit: f.Limit})
	if err != nil {
		return nil, Error(err)
	}
	out := make([]api.NotificationDelivery, 0, len(ds))
	for _, d := range ds {
		out = append(out, NotificationDeliveryOf(d))
	}
	return out, nil
}

// NotificationDeliveryOf is d in the API's shape: times in UTC, a status
// of 0 (no answer) and a zero delivery time as null.
func NotificationDeliveryOf(d store.NotificationDelivery) api.NotificationDelivery {
	v := api.NotificationDelivery{Destination: d.Destination, Event: d.Event, OperationID: d.OperationID, DeliveryID: d.DeliveryKey,
		State: d.State, Attempts: d.Attempts, LastError: d.LastError,
		FirstAttemptAt: d.FirstAttemptAt.UTC(), LastAttemptAt: d.LastAttemptAt.UTC()}
	if d.LastStatusCode != 0 {
		code := d.LastStatusCode
		v.LastStatusCode = &code
	}
	if !d.DeliveredAt.IsZero() {
		at := d.DeliveredAt.UTC()
		v.DeliveredAt = &at
	}
	return v
}
