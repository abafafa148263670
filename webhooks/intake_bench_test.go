package webhooks

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"changebot/platform/gitlab"
	"changebot/store/sqlite"
)

// benchClientsPerCPU is how many concurrent senders b.RunParallel runs per
// GOMAXPROCS: the handler waits on the database, so one per CPU would leave
// it idle. Compare with pgbench at the same client count (DESIGN §9).
const benchClientsPerCPU = 4

// BenchmarkIntake measures the whole intake of one accepted delivery (token
// check, decode, one transaction storing the delivery and enqueueing its
// job) through the real handler over the real store, once per engine
// (engine=postgres: a fresh schema on TEST_DATABASE_URL; engine=sqlite: a
// fresh file in a temporary directory), with concurrent senders each
// sending distinct deliveries. Besides ns/op it reports the 99th percentile
// latency (p99-ms) and the client count. DESIGN §9: intake should reach
// half of pgbench's single-row insert rate at the same client count, with
// p99 under 20 ms at half that rate. BENCHMARKS.md has measured figures.
//
//	go test ./webhooks/ -run '^$' -bench Intake -benchtime 5s
func BenchmarkIntake(b *testing.B) {
	if testing.Short() {
		b.Skip("needs PostgreSQL; skipped under -short")
	}
	engines := []struct {
		name    string
		handler func(b *testing.B) http.Handler
	}{
		{"postgres", func(b *testing.B) http.Handler {
			h, _ := newPostgresHandler(b, slog.New(slog.DiscardHandler))
			return h
		}},
		{"sqlite", newSQLiteHandler},
	}
	for _, e := range engines {
		b.Run("engine="+e.name, func(b *testing.B) { benchmarkIntake(b, e.handler(b)) })
	}
}

// newSQLiteHandler builds the real handler over the real SQLite store in a
// fresh, migrated file of b's own.
func newSQLiteHandler(b *testing.B) http.Handler {
	b.Helper()
	db, err := sqlite.OpenDB(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if err := sqlite.Migrate(context.Background(), db, nil); err != nil {
		b.Fatalf("sqlite.Migrate: %v", err)
	}
	s, err := sqlite.New(db, nil)
	if err != nil {
		b.Fatalf("sqlite.New: %v", err)
	}
	h, err := NewGitLabHandler(GitLabConfig{
		Secrets: []string{secretA},
		Store:   s,
		Decode:  gitlab.DecodeHook,
		Logger:  slog.New(slog.DiscardHandler),
		Metrics: NewMetrics(prometheus.NewRegistry()),
	})
	if err != nil {
		b.Fatalf("NewGitLabHandler: %v", err)
	}
	return h
}

func benchmarkIntake(b *testing.B, h http.Handler) {
	body := readFixture(b, "webhook-merge_request-open.json")
	var seq atomic.Int64
	var mu sync.Mutex
	var latencies []time.Duration

	b.SetParallelism(benchClientsPerCPU)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		local := make([]time.Duration, 0, 1024)
		for pb.Next() {
			d := delivery{event: evMR, token: secretA, idemKey: "bench-" + strconv.FormatInt(seq.Add(1), 10), body: body}
			start := time.Now()
			w := serve(h, d)
			local = append(local, time.Since(start))
			if w.Code != 200 {
				b.Errorf("status %d: %s", w.Code, w.Body)
				return
			}
		}
		mu.Lock()
		latencies = append(latencies, local...)
		mu.Unlock()
	})
	b.StopTimer()
	if len(latencies) > 0 {
		slices.Sort(latencies)
		p99 := latencies[(len(latencies)*99)/100]
		b.ReportMetric(float64(p99)/float64(time.Millisecond), "p99-ms")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
	b.ReportMetric(float64(benchClientsPerCPU*runtime.GOMAXPROCS(0)), "clients")
}
