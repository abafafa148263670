package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"changebot/store"
	"changebot/store/sqlite"
)

// openLog opens a migrated SQLite store of t's own: the delivery log the
// worker writes, a real database.
func openLog(t *testing.T) *sqlite.Store {
	t.Helper()
	db, err := sqlite.OpenDB(filepath.Join(t.TempDir(), "notify.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := sqlite.Migrate(context.Background(), db, nil); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWorkerOutcomes: what each answer of a destination makes of the job
// (done, retried, snoozed for its Retry-After, cancelled) and of the
// delivery log, and what is sent: the signed payload to a webhook, the
// text alone to Slack.
func TestWorkerOutcomes(t *testing.T) {
	t.Parallel()
	const secret = "worker-secret"
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	var last *http.Request
	var lastBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		last, lastBody = r, body
		mu.Unlock()
		status := http.StatusOK
		switch r.URL.Path {
		case "/503":
			status = http.StatusServiceUnavailable
		case "/503-retry-after":
			w.Header().Set("Retry-After", "7")
			status = http.StatusServiceUnavailable
		case "/429":
			status = http.StatusTooManyRequests
		case "/404":
			status = http.StatusNotFound
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL + "/secret-path"
	down.Close()

	hook := func(name, path string) Destination {
		return Destination{Name: name, Kind: KindWebhook, URL: srv.URL + path, Secret: secret}
	}
	router, err := NewRouter([]Destination{hook("ok", "/ok"), hook("busy", "/503"), hook("later", "/503-retry-after"),
		hook("limited", "/429"), hook("missing", "/404"), {Name: "down", Kind: KindWebhook, URL: downURL, Secret: secret},
		{Name: "chat", Kind: KindSlack, URL: srv.URL + "/slack"}})
	if err != nil {
		t.Fatal(err)
	}
	log := openLog(t)
	reg := prometheus.NewRegistry()
	w, err := NewWorker(WorkerConfig{Router: router, Log: log, NowFunc: func() time.Time { return now }, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	payload := Payload{Event: EventFailed, IdempotencyKey: "op_w:4", OperationID: "op_w", Project: "g/r", Step: "HANDLE_FAILED"}

	type outcome string
	const (
		done    outcome = "done"
		retried outcome = "retried"
		snoozed outcome = "snoozed"
		gaveUp  outcome = "cancelled"
	)
	tests := []struct {
		name     string
		dest     string
		attempt  int
		metadata string
		want     outcome
		snooze   time.Duration
		state    string
		code     int
		errHas   string
	}{
		{name: "2xx delivered", dest: "ok", attempt: 1, want: done, state: store.NotificationDelivered, code: 200},
		{name: "5xx retried", dest: "busy", attempt: 1, want: retried, state: store.NotificationRetrying, code: 503, errHas: "answered 503"},
		{name: "Retry-After honoured", dest: "later", attempt: 1, want: snoozed, snooze: 7 * time.Second, state: store.NotificationRetrying, code: 503},
		{name: "429 retried", dest: "limited", attempt: 1, want: retried, state: store.NotificationRetrying, code: 429},
		{name: "4xx not retried", dest: "missing", attempt: 1, want: gaveUp, state: store.NotificationFailed, code: 404, errHas: "answered 404"},
		{name: "no answer retried", dest: "down", attempt: 1, want: retried, state: store.NotificationRetrying, errHas: "posting to the destination"},
		{name: "last attempt", dest: "busy", attempt: MaxAttempts, want: gaveUp, state: store.NotificationFailed, code: 503, errHas: "gave up after 15 attempts"},
		{name: "snoozes count", dest: "later", attempt: 5, metadata: `{"snoozes": 10}`, want: gaveUp, state: store.NotificationFailed, code: 503},
		{name: "destination removed", dest: "gone", attempt: 1, want: gaveUp, state: store.NotificationFailed, errHas: "no longer configured"},
		{name: "slack", dest: "chat", attempt: 1, want: done, state: store.NotificationDelivered, code: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Sequential: the server's last request is the case's.
			p := payload
			p.IdempotencyKey = "op_w:" + strings.ReplaceAll(tt.name, " ", "_")
			job := &river.Job[DeliverArgs]{JobRow: &rivertype.JobRow{Attempt: tt.attempt, MaxAttempts: MaxAttempts, Metadata: []byte(tt.metadata)},
				Args: DeliverArgs{Destination: tt.dest, Payload: p}}
			err := w.Work(context.Background(), job)
			var cancel *rivertype.JobCancelError
			var snooze *rivertype.JobSnoozeError
			got := retried
			switch {
			case err == nil:
				got = done
			case errors.As(err, &snooze):
				got = snoozed
			case errors.As(err, &cancel):
				got = gaveUp
			}
			if got != tt.want || (snooze != nil && snooze.Duration != tt.snooze) {
				t.Fatalf("Work = %v (%s), want %s", err, got, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "secret-path") {
				t.Errorf("error %q quotes the destination's URL", err)
			}
			ds, lerr := log.ListNotificationDeliveries(context.Background(), log.DB(), store.NotificationListParams{Destination: tt.dest})
			if lerr != nil || len(ds) == 0 {
				t.Fatalf("delivery log: %v %v", ds, lerr)
			}
			d := ds[0]
			if d.DeliveryKey != p.IdempotencyKey || d.State != tt.state || d.LastStatusCode != tt.code || d.Attempts != 1 ||
				!strings.Contains(d.LastError, tt.errHas) || strings.Contains(d.LastError, "secret-path") {
				t.Errorf("logged %+v, want state %s code %d error with %q", d, tt.state, tt.code, tt.errHas)
			}
		})
	}

	// Every attempt is counted by destination, event and state.
	for _, c := range []struct {
		dest, state string
		want        float64
	}{{"ok", store.NotificationDelivered, 1}, {"busy", store.NotificationRetrying, 1}, {"busy", store.NotificationFailed, 1},
		{"missing", store.NotificationFailed, 1}, {"gone", store.NotificationFailed, 1}, {"chat", store.NotificationDelivered, 1}} {
		if got := testutil.ToFloat64(w.attempts.WithLabelValues(c.dest, "failed", c.state)); got != c.want {
			t.Errorf("changebot_notifications_total{destination=%q,state=%q} = %v, want %v", c.dest, c.state, got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "changebot_notifications_total"); err != nil || n == 0 {
		t.Errorf("changebot_notifications_total not registered: %d %v", n, err)
	}

	// What was sent: the last case's Slack text, and a webhook's signed
	// payload (sent again to check).
	mu.Lock()
	slackReq, slackBody := last, lastBody
	mu.Unlock()
	var text map[string]string
	if err := json.Unmarshal(slackBody, &text); err != nil || !strings.HasPrefix(text["text"], "changebot: change op_w") ||
		slackReq.Header.Get(HeaderSignature) != "" {
		t.Errorf("Slack got %s (signature %q)", slackBody, slackReq.Header.Get(HeaderSignature))
	}
	job := &river.Job[DeliverArgs]{JobRow: &rivertype.JobRow{Attempt: 1, MaxAttempts: MaxAttempts}, Args: DeliverArgs{Destination: "ok", Payload: payload}}
	if err := w.Work(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	req, body := last, lastBody
	mu.Unlock()
	want, _ := json.Marshal(payload)
	if string(body) != string(want) || req.Header.Get(HeaderTimestamp) != strconv.FormatInt(now.Unix(), 10) ||
		req.Header.Get(HeaderSignature) != Sign(secret, now.Unix(), body) || req.Header.Get(HeaderDelivery) != "op_w:4" ||
		req.Header.Get(HeaderEvent) != "failed" || req.Header.Get("Content-Type") != "application/json" {
		t.Errorf("webhook got %s with headers %v", body, req.Header)
	}
}
