package webhooks

import (
	"log/slog"
	"net/http"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"changebot/flows/rules"
	"changebot/platform/gitlab"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// newPostgresHandler builds the real handler over the real store in a
// fresh schema (STYLE 33: fails without PostgreSQL, except under -short).
// log nil logs to t.Log.
func newPostgresHandler(t testing.TB, log *slog.Logger) (http.Handler, *pgxpool.Pool) {
	t.Helper()
	sc := pgtest.New(t)
	s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatalf("postgres.New: %v", err)
	}
	if log == nil {
		log, _ = newLogger(t)
	}
	h, err := NewGitLabHandler(GitLabConfig{
		Secrets: []string{secretA},
		Store:   s,
		Decode:  gitlab.DecodeHook,
		Logger:  log,
		Metrics: NewMetrics(prometheus.NewRegistry()),
	})
	if err != nil {
		t.Fatalf("NewGitLabHandler: %v", err)
	}
	return h, sc.Pool
}

// TestIntakePostgres sends the same delivery 5 times through the real
// handler and store (issue 2 acceptance): one row in webhook_deliveries and
// one process_delivery job on the events queue, whether the copies come one
// after the other or at once, with or without an Idempotency-Key.
func TestIntakePostgres(t *testing.T) {
	t.Parallel()
	h, pool := newPostgresHandler(t, nil)
	ctx := t.Context()
	body := readFixture(t, "webhook-pipeline-mr-success.json")
	tests := []struct {
		name       string
		idemKey    string
		concurrent bool
	}{
		{name: "same Idempotency-Key in sequence", idemKey: "5b2c1d3e-0001"},
		{name: "same Idempotency-Key at once", idemKey: "5b2c1d3e-0002", concurrent: true},
		{name: "no Idempotency-Key, same body"},
	}
	for i, tt := range tests {
		// Sequential: each case adds exactly one row and one job.
		t.Run(tt.name, func(t *testing.T) {
			d := delivery{event: evPipeline, token: secretA, idemKey: tt.idemKey, body: body}
			codes := make([]int, 5)
			answers := make([]string, 5)
			var wg sync.WaitGroup
			for n := range 5 {
				send := func() {
					w := serve(h, d)
					codes[n], answers[n] = w.Code, w.Body.String()
				}
				if tt.concurrent {
					wg.Go(send)
				} else {
					send()
				}
			}
			wg.Wait()
			accepted, duplicates := 0, 0
			for n, code := range codes {
				if code != http.StatusOK {
					t.Fatalf("send %d: %d %s", n, code, answers[n])
				}
				switch answers[n] {
				case `{"result":"duplicate"}` + "\n":
					duplicates++
				default:
					accepted++
				}
			}
			if accepted != 1 || duplicates != 4 {
				t.Errorf("%d accepted, %d duplicates; want 1 and 4 (%v)", accepted, duplicates, answers)
			}
			var rows, jobs int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries`).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind='process_delivery'`).Scan(&jobs); err != nil {
				t.Fatal(err)
			}
			if rows != i+1 || jobs != i+1 {
				t.Errorf("%d deliveries and %d process_delivery jobs, want %d each", rows, jobs, i+1)
			}
		})
	}

	// Every job points at its delivery, on the events queue.
	var orphans int
	err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job j
		WHERE j.kind = $1 AND (j.queue <> $2 OR NOT EXISTS (
			SELECT 1 FROM webhook_deliveries d WHERE d.id = (j.args->>'delivery_id')::bigint))`,
		rules.KindProcessDelivery, rules.QueueEvents).Scan(&orphans)
	if err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d process_delivery jobs without their delivery or off the %s queue", orphans, rules.QueueEvents)
	}
	var stored struct {
		event     string
		projectID int64
		key       string
	}
	err = pool.QueryRow(ctx, `SELECT event, project_id, dedupe_key FROM webhook_deliveries ORDER BY id LIMIT 1`).
		Scan(&stored.event, &stored.projectID, &stored.key)
	if err != nil {
		t.Fatal(err)
	}
	if stored.event != evPipeline || stored.projectID != 1 || stored.key != "idem:5b2c1d3e-0001" {
		t.Errorf("first delivery event %q, project %d, key %q; want %q, 1, idem:5b2c1d3e-0001", stored.event, stored.projectID, stored.key, evPipeline)
	}
}
