package webhooks

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"changebot/platform/gitlab"
	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// dispatchEnv is a PostgreSQL store in a fresh schema and its counts.
type dispatchEnv struct {
	store *postgres.Store
	sc    pgtest.Schema
}

func newDispatchEnv(t *testing.T) *dispatchEnv {
	t.Helper()
	sc := pgtest.New(t)
	s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	return &dispatchEnv{store: s, sc: sc}
}

// counts returns the stored deliveries, the undispatched ones, and the
// process_delivery jobs naming a stored delivery.
func (e *dispatchEnv) counts(t *testing.T) (rows, undispatched, jobs int) {
	t.Helper()
	err := e.sc.Pool.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE dispatched_at IS NULL),
		(SELECT count(*) FROM river_job j JOIN webhook_deliveries d ON d.id = (j.args->>'delivery_id')::bigint
		 WHERE j.kind = 'process_delivery')
		FROM webhook_deliveries`).Scan(&rows, &undispatched, &jobs)
	if err != nil {
		t.Fatal(err)
	}
	return rows, undispatched, jobs
}

// waitJobs waits until want process_delivery jobs exist and no delivery
// is undispatched (a liveness wait: the test fails only when it never
// happens).
func (e *dispatchEnv) waitJobs(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows, undispatched, jobs := e.counts(t)
		if jobs == want && undispatched == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries, %d undispatched, %d jobs; want %d jobs, none undispatched", rows, undispatched, jobs, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestIntakeDispatchPostgres (issue 12): with a dispatcher the request path
// stores the delivery alone (one autocommit statement): the answers are
// exactly one accepted and the rest duplicate, no job exists while no
// dispatcher ran, and the woken dispatcher then enqueues one job per stored
// delivery.
func TestIntakeDispatchPostgres(t *testing.T) {
	t.Parallel()
	e := newDispatchEnv(t)
	d, err := NewDispatcher(DispatcherConfig{Store: e.store, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	log, _ := newLogger(t)
	h, err := NewGitLabHandler(GitLabConfig{Secrets: []string{secretA}, Store: e.store, Dispatcher: d,
		Decode: gitlab.DecodeHook, Logger: log, Metrics: NewMetrics(prometheus.NewRegistry())})
	if err != nil {
		t.Fatal(err)
	}
	body := readFixture(t, "webhook-pipeline-mr-success.json")
	keys := []string{"k-1", "k-1", "k-1", "k-2", "k-2", "k-3", "k-1", "k-3"}
	answers := make([]string, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			w := serve(h, delivery{event: evPipeline, token: secretA, idemKey: k, body: body})
			if w.Code != http.StatusOK {
				t.Errorf("send %d: %d %s", i, w.Code, w.Body.String())
			}
			answers[i] = w.Body.String()
		})
	}
	wg.Wait()
	duplicates := 0
	for _, a := range answers {
		if a == `{"result":"duplicate"}`+"\n" {
			duplicates++
		}
	}
	if duplicates != len(keys)-3 {
		t.Errorf("%d duplicates, want %d (%v)", duplicates, len(keys)-3, answers)
	}
	if rows, undispatched, jobs := e.counts(t); rows != 3 || undispatched != 3 || jobs != 0 {
		t.Errorf("before the dispatcher ran: %d deliveries, %d undispatched, %d jobs; want 3, 3, 0", rows, undispatched, jobs)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// The intake woke it: the hour-long interval never passes here.
	e.waitJobs(t, 3)
}

// TestDispatcherPeriodicPass (issue 12): deliveries a replica stored but
// never dispatched (it died before waking its dispatcher) are enqueued by
// another replica's dispatcher at its periodic pass, without any wake.
func TestDispatcherPeriodicPass(t *testing.T) {
	t.Parallel()
	e := newDispatchEnv(t)
	out, err := e.store.StoreDeliveries(t.Context(), []store.Delivery{
		{DedupeKey: "crashed-1", Event: evPipeline, Body: []byte(`{}`)},
		{DedupeKey: "crashed-2", Event: evPipeline, Body: []byte(`{}`)},
	})
	if err != nil || !out[0].Inserted || !out[1].Inserted {
		t.Fatalf("StoreDeliveries = %v, %v", out, err)
	}
	other, err := postgres.New(e.sc.Pool, &postgres.StoreOpts{Schema: e.sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDispatcher(DispatcherConfig{Store: other, Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, jobs := e.counts(t); jobs != 0 {
		t.Fatalf("%d jobs before any dispatcher ran, want 0", jobs)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	e.waitJobs(t, 2)
}
