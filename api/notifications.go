package api

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"changebot/internal/textcheck"
)

// Notification log limits of GET /api/v1/notifications: limit's default
// and largest value.
const (
	DefaultNotificationLimit = 100
	MaxNotificationLimit     = 500
)

// NotificationDelivery is one delivery of the notification log: one event
// of one change to one destination, with what its attempts gave
// (openapi.json NotificationDelivery).
type NotificationDelivery struct {
	// Destination is the configured destination's name.
	Destination string `json:"destination"`
	// Event is failed, needs_person, merged or applied.
	Event       string `json:"event"`
	OperationID string `json:"operation_id"`
	// DeliveryID is the idempotency key "<operation_id>:<event seq>"
	// sent as X-Changebot-Delivery.
	DeliveryID string `json:"delivery_id"`
	// State is retrying, delivered or failed.
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	// LastStatusCode is the last attempt's HTTP status; nil when the
	// destination did not answer.
	LastStatusCode *int   `json:"last_status_code"`
	LastError      string `json:"last_error"`
	// FirstAttemptAt, LastAttemptAt and DeliveredAt are UTC; DeliveredAt
	// is nil until a 2xx.
	FirstAttemptAt time.Time  `json:"first_attempt_at"`
	LastAttemptAt  time.Time  `json:"last_attempt_at"`
	DeliveredAt    *time.Time `json:"delivered_at"`
}

// NotificationListView is the body of GET /api/v1/notifications.
type NotificationListView struct {
	Deliveries []NotificationDelivery `json:"deliveries"`
}

// NotificationFilter selects deliveries of the log: those of OperationID
// and of Destination when each is set, at most Limit (1 to
// MaxNotificationLimit), newest first.
type NotificationFilter struct {
	OperationID string
	Destination string
	Limit       int
}

// Notifications is the log of outgoing notifications (issue 25 point 3).
// Its errors are failures to answer at all.
type Notifications interface {
	// ListNotifications lists the deliveries f selects, newest first.
	ListNotifications(ctx context.Context, f NotificationFilter) ([]NotificationDelivery, error)
}

// notificationParams are the query parameters of the notification log.
var notificationParams = []string{"operation_id", "destination", "limit"}

// listNotifications serves GET /api/v1/notifications (any token): the
// delivery log, filtered by operation_id and destination, newest first.
// An unknown, repeated or malformed parameter is a 400; without
// Config.Notifications the log is empty.
func (h *Handler) listNotifications(w http.ResponseWriter, r *http.Request) {
	if !knownParams(w, r, notificationParams...) {
		return
	}
	q := r.URL.Query()
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case len(q[k]) > 1:
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("query parameter %q given %d times: give it once", k, len(q[k])),
				"fields": []FieldError{{Field: k, Message: "is given more than once"}}})
			return
		}
	}
	f := NotificationFilter{OperationID: q.Get("operation_id"), Destination: q.Get("destination"), Limit: DefaultNotificationLimit}
	for _, p := range []struct{ name, v string }{{"operation_id", f.OperationID}, {"destination", f.Destination}} {
		msg := textcheck.Problem(p.v)
		if msg == "" && utf8.RuneCountInString(p.v) > 200 {
			msg = "is longer than 200 characters"
		}
		if msg != "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("query parameter %q %s", p.name, msg),
				"fields": []FieldError{{Field: p.name, Message: msg}}})
			return
		}
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxNotificationLimit {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("limit must be a whole number from 1 to %d", MaxNotificationLimit),
				"fields": []FieldError{{Field: "limit", Message: fmt.Sprintf("is not a whole number from 1 to %d", MaxNotificationLimit)}}})
			return
		}
		f.Limit = n
	}
	out := NotificationListView{Deliveries: []NotificationDelivery{}}
	if h.cfg.Notifications != nil {
		ds, err := h.cfg.Notifications.ListNotifications(r.Context(), f)
		if err != nil {
			h.log.Error("listing notification deliveries", "err", err, "operation_id", f.OperationID)
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "could not read the notification log, try again"})
			return
		}
		out.Deliveries = append(out.Deliveries, ds...)
	}
	writeJSON(w, http.StatusOK, out)
}
