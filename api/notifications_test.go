package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"
)

// fakeNotifications is a hand-written delivery log that records the
// filters it was asked.
type fakeNotifications struct {
	deliveries []NotificationDelivery
	asked      []NotificationFilter
	err        error
}

func (f *fakeNotifications) ListNotifications(_ context.Context, nf NotificationFilter) ([]NotificationDelivery, error) {
	f.asked = append(f.asked, nf)
	if f.err != nil {
		return nil, f.err
	}
	var out []NotificationDelivery
	for _, d := range f.deliveries {
		if (nf.OperationID == "" || d.OperationID == nf.OperationID) && (nf.Destination == "" || d.Destination == nf.Destination) {
			out = append(out, d)
		}
	}
	return out, nil
}

// setupNotifications is setup with log as Config.Notifications.
func setupNotifications(t *testing.T, log Notifications) *apiSetup {
	t.Helper()
	s := setup(t, "")
	h, err := New(Config{Engine: s.changes, Store: s.changes, Settings: s.settings, Queues: s.queues, Notifications: log,
		Tokens: []Token{{Role: RoleViewer, Token: viewerToken}}, ExternalURL: externalURL, MaxBodyBytes: 1 << 20, NowFunc: s.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	r := mux.NewRouter()
	h.Mount(r)
	s.srv = httptest.NewServer(TextInput(1<<20, false, r))
	t.Cleanup(s.srv.Close)
	return s
}

// TestNotificationList: any token reads the delivery log filtered by
// change and destination, a status of no answer and an undelivered one as
// null; unknown, repeated or malformed parameters are 400s naming them; a
// store that cannot answer is a 503 without its error; an installation
// without a log answers an empty list.
func TestNotificationList(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	code503 := 503
	log := &fakeNotifications{deliveries: []NotificationDelivery{
		{Destination: "ops", Event: "failed", OperationID: "op_a", DeliveryID: "op_a:4", State: "delivered", Attempts: 2,
			LastStatusCode: new(int), FirstAttemptAt: at, LastAttemptAt: at.Add(2 * time.Second), DeliveredAt: &at},
		{Destination: "chat", Event: "failed", OperationID: "op_a", DeliveryID: "op_a:4", State: "retrying", Attempts: 1,
			LastStatusCode: &code503, LastError: "the destination answered 503", FirstAttemptAt: at, LastAttemptAt: at},
		{Destination: "ops", Event: "merged", OperationID: "op_b", DeliveryID: "op_b:9", State: "failed", Attempts: 1,
			LastError: "posting to the destination: connection refused", FirstAttemptAt: at, LastAttemptAt: at},
	}}
	*log.deliveries[0].LastStatusCode = 200
	s := setupNotifications(t, log)
	tests := []struct {
		name string
		path string
		code int
		has  []string
		not  []string
	}{
		{"all", "/api/v1/notifications", 200, []string{`"delivery_id":"op_a:4"`, `"op_b:9"`, `"last_status_code":null`, `"delivered_at":null`,
			`"delivered_at":"2026-12-02T09:00:00Z"`}, nil},
		{"one change", "/api/v1/notifications?operation_id=op_b", 200, []string{`"op_b:9"`}, []string{`"op_a:4"`}},
		{"one destination", "/api/v1/notifications?destination=chat&limit=5", 200, []string{`"destination":"chat"`}, []string{`"destination":"ops"`}},
		{"unknown parameter", "/api/v1/notifications?project=x", 400, []string{`\"project\"`}, nil},
		{"repeated", "/api/v1/notifications?destination=a&destination=b", 400, []string{"given 2 times"}, nil},
		{"bad limit", "/api/v1/notifications?limit=0", 400, []string{"limit must be"}, nil},
		{"control character", "/api/v1/notifications?operation_id=a%1Bb", 400, []string{"control character"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := s.callDocumented(t, http.MethodGet, tt.path, viewerToken, "")
			if code != tt.code {
				t.Fatalf("GET %s = %d %s, want %d", tt.path, code, body, tt.code)
			}
			for _, h := range tt.has {
				if !strings.Contains(body, h) {
					t.Errorf("GET %s = %s, want it to hold %s", tt.path, body, h)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(body, n) {
					t.Errorf("GET %s = %s, want no %s", tt.path, body, n)
				}
			}
		})
	}
	if got := log.asked[len(log.asked)-1]; got != (NotificationFilter{Destination: "chat", Limit: 5}) {
		t.Errorf("last filter asked %+v", got)
	}
	if code, _ := s.call(t, http.MethodGet, "/api/v1/notifications", "", ""); code != 401 {
		t.Errorf("without a token: %d, want 401", code)
	}
	log.err = errors.New("connection refused")
	if code, body := s.callDocumented(t, http.MethodGet, "/api/v1/notifications", viewerToken, ""); code != 503 || strings.Contains(body, "connection refused") {
		t.Errorf("store down: %d %s, want 503 without the store's error", code, body)
	}
	none := setupNotifications(t, nil)
	if code, body := none.callDocumented(t, http.MethodGet, "/api/v1/notifications", viewerToken, ""); code != 200 || body != `{"deliveries":[]}`+"\n" {
		t.Errorf("without a log: %d %s", code, body)
	}
}
