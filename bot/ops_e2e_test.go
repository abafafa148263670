package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/flows"
	"changebot/store/postgres/pgtest"
)

// logLine is one JSON log line, its fields by name.
type logLine map[string]any

func (l logLine) str(k string) string { s, _ := l[k].(string); return s }

// jsonLines decodes the JSON log lines in s.
func jsonLines(t *testing.T, s string) []logLine {
	t.Helper()
	var out []logLine
	for _, raw := range strings.Split(strings.TrimSpace(s), "\n") {
		if raw == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line is not JSON: %q", raw)
		}
		out = append(out, l)
	}
	return out
}

// debugTap is the handler of a test's info logger that also sees the
// records below info: it hands next (the info logger's handler) the records
// at info and above, as an info logger would, and counts the messages of
// all, so that a test can wait for a debug line it does not log (River's
// routine lines, its producers' shutdown). Its WithAttrs and WithGroup
// handlers share the counts.
type debugTap struct {
	next slog.Handler
	seen *tapCounts
}

type tapCounts struct {
	mu   sync.Mutex
	msgs map[string]int
}

func newDebugTap(next slog.Handler) debugTap {
	return debugTap{next: next, seen: &tapCounts{msgs: map[string]int{}}}
}

// count is how many records had a message ending in suffix.
func (h debugTap) count(suffix string) int {
	h.seen.mu.Lock()
	defer h.seen.mu.Unlock()
	n := 0
	for m, c := range h.seen.msgs {
		if strings.HasSuffix(m, suffix) {
			n += c
		}
	}
	return n
}

// Enabled implements slog.Handler.
func (h debugTap) Enabled(context.Context, slog.Level) bool { return true }

// Handle implements slog.Handler.
func (h debugTap) Handle(ctx context.Context, r slog.Record) error {
	h.seen.mu.Lock()
	h.seen.msgs[r.Message]++
	h.seen.mu.Unlock()
	if r.Level < slog.LevelInfo || !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h debugTap) WithAttrs(attrs []slog.Attr) slog.Handler {
	return debugTap{next: h.next.WithAttrs(attrs), seen: h.seen}
}

// WithGroup implements slog.Handler.
func (h debugTap) WithGroup(name string) slog.Handler {
	return debugTap{next: h.next.WithGroup(name), seen: h.seen}
}

// opsRun is one change carried to VALIDATED by a bot whose info log is
// captured as JSON, and the bot's /metrics read afterwards.
type opsRun struct {
	opID    string
	log     string
	metrics string
}

// runOneChangeCapturingLogs runs the demo's change end to end with the
// bot logging JSON at info into a buffer, then scrapes /metrics.
func runOneChangeCapturingLogs(t *testing.T) opsRun {
	t.Helper()
	env := newTestEnv(t, true, 200*time.Millisecond)
	sc := pgtest.New(t)
	env.Config.DatabaseURL = pgtest.URL()
	logs := &syncBuffer{}
	tap := newDebugTap(slog.NewJSONHandler(io.MultiWriter(logs, tlogWriter{t}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	log := slog.New(tap)
	app, err := NewApp(context.Background(), env.Config, &AppOpts{Logger: log, Schema: sc.Name, Poll: demo.Poll})
	if err != nil {
		t.Fatalf("NewApp: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, env.Listener) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		app.Close()
	}()
	opID, err := demo.SubmitChange(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demo.FollowChange(context.Background(), env, opID, 60*time.Second, func(api.ChangeView) {}); err != nil {
		t.Fatal(err)
	}
	// The active changes gauge is exported by the job leader once it has
	// refreshed it as leader (flows.ActiveGauge: soon after start, then
	// every 15 s); River may elect this replica only after that first
	// refresh, so the scrape waits for the gauge, up to two refreshes.
	var body []byte
	for deadline := time.Now().Add(2*flows.ActiveGaugeInterval + 5*time.Second); ; time.Sleep(250 * time.Millisecond) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, env.BaseURL+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if strings.Contains(string(body), "changebot_active_changes{") || time.Now().After(deadline) {
			break
		}
	}
	// River's producers log their job counts (every 5 s while jobs ran):
	// the captured log is read once one such routine line has been
	// logged, at debug, so that the test sees where it went.
	waitFor(t, 30*time.Second, "River's producers to log their job counts", func() bool {
		return tap.count(": Producer job counts") > 0
	})
	return opsRun{opID: opID, log: logs.String(), metrics: string(body)}
}

// TestAccessLogOneLinePerRequest carries one change end to end and reads
// the bot's info log: every HTTP request it answered has one "http
// request" line with method, route template, status, duration and the
// delivery or operation id; the handlers' own per-request lines and
// River's routine lines are not at info.
func TestAccessLogOneLinePerRequest(t *testing.T) {
	t.Parallel()
	run := runOneChangeCapturingLogs(t)
	lines := jsonLines(t, run.log)
	type key struct{ method, route string }
	seen := map[key][]logLine{}
	for _, l := range lines {
		if l.str("level") != "INFO" {
			t.Errorf("a line below info reached an info logger: %v", l)
		}
		msg := l.str("msg")
		for _, quiet := range append([]string{"webhook accepted", "callback applied"}, riverQuietSuffixes...) {
			if strings.HasSuffix(msg, quiet) {
				t.Errorf("routine line logged at info: %v", l)
			}
		}
		if msg != "http request" {
			continue
		}
		if _, ok := l["duration_ms"].(float64); !ok {
			t.Errorf("access line without duration_ms: %v", l)
		}
		if _, ok := l["status"].(float64); !ok {
			t.Errorf("access line without status: %v", l)
		}
		k := key{l.str("method"), l.str("route")}
		seen[k] = append(seen[k], l)
	}
	one := func(k key) logLine {
		t.Helper()
		if len(seen[k]) == 0 {
			t.Fatalf("no access line for %v; access lines: %v", k, seen)
		}
		return seen[k][0]
	}
	if l := one(key{"POST", "/api/v1/changes"}); l["status"] != float64(202) || l.str("operation_id") != run.opID {
		t.Errorf("submit access line %v, want status 202 and operation_id %s", l, run.opID)
	}
	for _, l := range seen[key{"GET", "/api/v1/changes/{id}"}] {
		if l["status"] != float64(200) || l.str("operation_id") != run.opID {
			t.Errorf("status poll access line %v, want 200 and operation_id %s", l, run.opID)
		}
	}
	one(key{"GET", "/api/v1/changes/{id}"})
	for _, l := range seen[key{"POST", "/webhooks/gitlab"}] {
		if l["status"] != float64(200) || l.str("delivery_uuid") == "" {
			t.Errorf("webhook access line %v, want 200 and the delivery's uuid", l)
		}
	}
	one(key{"POST", "/webhooks/gitlab"})
	if l := one(key{"POST", "/callbacks/approval"}); l.str("operation_id") != run.opID {
		t.Errorf("approval callback access line %v, want operation_id %s", l, run.opID)
	}
	// /metrics is scraped at debug: not in an info log.
	if len(seen[key{"GET", "/metrics"}]) != 0 {
		t.Errorf("the /metrics scrape was logged at info: %v", seen[key{"GET", "/metrics"}])
	}
}

// TestRiverRoutineLinesAtDebug: River's periodic producer and maintenance
// lines go to debug, its other lines keep their level and attributes.
func TestRiverRoutineLinesAtDebug(t *testing.T) {
	t.Parallel()
	tests := []struct {
		msg       string
		level     slog.Level
		wantLevel string // "" when dropped at info
	}{
		{"producer: Producer job counts", slog.LevelInfo, ""},
		{"JobCleaner: Ran successfully", slog.LevelInfo, ""},
		{"PeriodicJobEnqueuer: nil returned from periodic job constructor, skipping", slog.LevelInfo, ""},
		{"River client started", slog.LevelInfo, "INFO"},
		{"jobexecutor.JobExecutor: Job errored; retrying", slog.LevelInfo, "INFO"},
		{"producer: Error fetching jobs", slog.LevelError, "ERROR"},
	}
	for _, tc := range tests {
		t.Run(tc.msg, func(t *testing.T) {
			for _, min := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
				var buf bytes.Buffer
				log := quietRiverLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: min})))
				log.With("client_id", "c1").Log(context.Background(), tc.level, tc.msg, "queue", "default") //nolint:sloglint // River's own messages are the input
				want := tc.wantLevel
				if want == "" && min == slog.LevelDebug {
					want = "DEBUG"
				}
				if want == "" {
					if buf.Len() != 0 {
						t.Fatalf("at %v: logged %s", min, buf.String())
					}
					continue
				}
				l := jsonLines(t, buf.String())
				if len(l) != 1 || l[0].str("level") != want || l[0].str("queue") != "default" || l[0].str("client_id") != "c1" {
					t.Fatalf("at %v: logged %s, want one %s line with its attributes", min, buf.String(), want)
				}
			}
		})
	}
}

// TestLeaderPrunesOldIntakeRows: a running bot (its job queue's leader)
// deletes a processed delivery and a callback row older than
// retention.intake_max_age soon after it starts, and keeps young ones.
func TestLeaderPrunesOldIntakeRows(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 200*time.Millisecond)
	sc := pgtest.New(t)
	ctx := context.Background()
	old, young := time.Now().Add(-31*24*time.Hour), time.Now().Add(-time.Hour)
	for i, at := range []time.Time{old, young} {
		if _, err := sc.Pool.Exec(ctx, `INSERT INTO webhook_deliveries (dedupe_key, event, body, received_at, processed_at, outcome)
			VALUES ($1, 'Note Hook', '{}'::bytea, $2, $2, 'routed')`, fmt.Sprintf("idem:age%d", i), at); err != nil {
			t.Fatal(err)
		}
		if _, err := sc.Pool.Exec(ctx, `INSERT INTO callback_requests (request_id, kind, operation_id, result, received_at)
			VALUES ($1, 'approval', 'op_x', 'ACCEPTED', $2)`, fmt.Sprintf("age%d", i), at); err != nil {
			t.Fatal(err)
		}
	}
	env.Config.DatabaseURL = pgtest.URL()
	app, err := NewApp(ctx, env.Config, &AppOpts{Logger: testLogger(t), Schema: sc.Name, Poll: demo.Poll})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx, env.Listener) }()
	defer func() {
		cancel()
		<-done
		app.Close()
	}()
	left := func() (deliveries, callbacks []string) {
		rows, err := sc.Pool.Query(ctx, `SELECT dedupe_key FROM webhook_deliveries UNION ALL SELECT 'cb:' || request_id FROM callback_requests ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(k, "cb:") {
				callbacks = append(callbacks, k)
			} else {
				deliveries = append(deliveries, k)
			}
		}
		return deliveries, callbacks
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, c := left()
		if len(d) == 1 && len(c) == 1 {
			if d[0] != "idem:age1" || c[0] != "cb:age1" {
				t.Fatalf("left %v %v, want the young rows", d, c)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after start the old rows are still there: %v %v", d, c)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
