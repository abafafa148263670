package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Notification delivery states (column notification_deliveries.state;
// persisted).
const (
	// NotificationRetrying: the last attempt failed in a way that is
	// retried (a 5xx, a 429, no answer); the job runs again.
	NotificationRetrying = "retrying"
	// NotificationDelivered: the destination answered 2xx.
	NotificationDelivered = "delivered"
	// NotificationFailed: the destination refused the delivery (a 4xx
	// other than 429), the attempts ran out, or the destination is no
	// longer configured; nothing retries it.
	NotificationFailed = "failed"
)

// NotificationAttempt is one attempt to deliver a notification (issue 25
// point 3), as the notification job records it after each POST.
type NotificationAttempt struct {
	// Destination is the configured destination's name.
	Destination string
	// Event is the notification event (failed, needs_person, merged,
	// applied).
	Event string
	// OperationID is the change the event is about.
	OperationID string
	// DeliveryKey is the delivery's idempotency key,
	// "<operation_id>:<event seq>" (X-Changebot-Delivery); with
	// Destination it names the delivery.
	DeliveryKey string
	// State is NotificationRetrying, NotificationDelivered or
	// NotificationFailed.
	State string
	// StatusCode is the HTTP status the destination answered; 0 when it
	// did not answer.
	StatusCode int
	// Error says why the attempt failed ("" when delivered); it never
	// holds the destination's URL or secret.
	Error string
}

// NotificationDelivery is one row of the delivery log
// (notification_deliveries): a notification of one event to one
// destination, with what its attempts gave.
type NotificationDelivery struct {
	Destination string
	Event       string
	OperationID string
	DeliveryKey string
	State       string
	// Attempts counts the attempts recorded so far, from 1.
	Attempts int
	// LastStatusCode is the last attempt's HTTP status (0: no answer);
	// LastError why it failed ("" when it did not).
	LastStatusCode int
	LastError      string
	// FirstAttemptAt and LastAttemptAt are when the first and the last
	// attempts were recorded (UTC); DeliveredAt when the destination
	// accepted it, zero when it has not.
	FirstAttemptAt time.Time
	LastAttemptAt  time.Time
	DeliveredAt    time.Time
}

// NotificationListParams select deliveries of the log: those of
// OperationID and of Destination when each is set, at most Limit (at least
// 1, at most MaxNotificationList), newest first.
type NotificationListParams struct {
	OperationID string
	Destination string
	Limit       int
}

// MaxNotificationList bounds NotificationListParams.Limit.
const MaxNotificationList = 500

// NotificationQueries are the statements of the delivery log.
type NotificationQueries interface {
	// NotificationRecord inserts the delivery of a (destination, delivery
	// key) with one attempt, or adds one attempt to it: state, status
	// code and error become a's, delivered_at is set at now by the first
	// delivered attempt; it returns the row as written.
	NotificationRecord(ctx context.Context, a NotificationAttempt, now time.Time) (NotificationDelivery, error)
	// NotificationList lists the deliveries p selects, newest first
	// (first attempt, then destination and key).
	NotificationList(ctx context.Context, p NotificationListParams) ([]NotificationDelivery, error)
}

// Notifications are the delivery log of outgoing notifications (issue 25
// point 3).
type Notifications interface {
	RecordNotificationAttempt(ctx context.Context, db DBTX, a NotificationAttempt) (NotificationDelivery, error)
	ListNotificationDeliveries(ctx context.Context, db DBTX, p NotificationListParams) ([]NotificationDelivery, error)
}

// errNotificationAttempt refuses an attempt that names no delivery.
var errNotificationAttempt = errors.New("a notification attempt needs a destination, an event, an operation, a delivery key and a state")

// RecordNotificationAttempt adds attempt a to the delivery log, at the
// store's clock, and returns the delivery as it is then. The first
// attempt of a (destination, delivery key) creates its row; each later one
// counts one more attempt and replaces the last status and error. A
// delivered delivery stays delivered at its first delivery's time.
func (s *DriverStore) RecordNotificationAttempt(ctx context.Context, db DBTX, a NotificationAttempt) (NotificationDelivery, error) {
	if a.Destination == "" || a.Event == "" || a.OperationID == "" || a.DeliveryKey == "" ||
		(a.State != NotificationRetrying && a.State != NotificationDelivered && a.State != NotificationFailed) {
		return NotificationDelivery{}, errNotificationAttempt
	}
	x, err := s.d.Executor(db)
	if err != nil {
		return NotificationDelivery{}, err
	}
	a.Error = CleanText(a.Error)
	d, err := x.NotificationRecord(ctx, a, s.Now())
	if err != nil {
		return NotificationDelivery{}, fmt.Errorf("recording the notification %s to %s: %w", a.DeliveryKey, a.Destination, err)
	}
	return d, nil
}

// ListNotificationDeliveries lists the deliveries of the log p selects,
// newest first; a Limit out of range is clamped to 1..MaxNotificationList
// (0 means MaxNotificationList).
func (s *DriverStore) ListNotificationDeliveries(ctx context.Context, db DBTX, p NotificationListParams) ([]NotificationDelivery, error) {
	if p.Limit <= 0 || p.Limit > MaxNotificationList {
		p.Limit = MaxNotificationList
	}
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	out, err := x.NotificationList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("listing notification deliveries: %w", err)
	}
	return out, nil
}
