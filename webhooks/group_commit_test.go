package webhooks

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"changebot/flows/rules"
	"changebot/platform/gitlab"
	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
	"changebot/store/sqlite"
)

// intakeEngine opens a real store of one engine and counts rows in it.
type intakeEngine struct {
	name string
	open func(t *testing.T) (DeliveryStore, *countDB)
}

// countDB answers the tests' counting queries on the engine's database.
type countDB struct {
	count func(t *testing.T, query string) int
	// jobsPerDelivery counts the process_delivery jobs whose delivery_id
	// names a stored delivery, and the distinct deliveries they name.
	jobsPerDelivery string
}

func intakeEngines() []intakeEngine {
	return []intakeEngine{
		{"postgres", func(t *testing.T) (DeliveryStore, *countDB) {
			sc := pgtest.New(t)
			s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
			if err != nil {
				t.Fatal(err)
			}
			return s, &countDB{
				count: func(t *testing.T, query string) int {
					var n int
					if err := sc.Pool.QueryRow(t.Context(), query).Scan(&n); err != nil {
						t.Fatalf("%s: %v", query, err)
					}
					return n
				},
				jobsPerDelivery: `SELECT count(*) * 1000000 + count(DISTINCT d.id) FROM river_job j
					JOIN webhook_deliveries d ON d.id = (j.args->>'delivery_id')::bigint WHERE j.kind = 'process_delivery'`,
			}
		}},
		{"sqlite", func(t *testing.T) (DeliveryStore, *countDB) {
			db, err := sqlite.OpenDB(filepath.Join(t.TempDir(), "intake.db"))
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
			return s, &countDB{
				count: func(t *testing.T, query string) int {
					var n int
					if err := db.QueryRowContext(t.Context(), query).Scan(&n); err != nil && !errors.Is(err, sql.ErrNoRows) {
						t.Fatalf("%s: %v", query, err)
					}
					return n
				},
				jobsPerDelivery: `SELECT count(*) * 1000000 + count(DISTINCT d.id) FROM river_job j
					JOIN webhook_deliveries d ON d.id = json_extract(j.args, '$.delivery_id') WHERE j.kind = 'process_delivery'`,
			}
		}},
	}
}

// gatedStore holds the first InsertDeliveries call until release is
// closed (so that the requests after it queue for one shared commit),
// records the size of every call, and fails every call holding the key
// poison, as a database refusing one delivery would.
type gatedStore struct {
	inner   DeliveryStore
	poison  string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	mu      sync.Mutex
	sizes   []int
}

func newGatedStore(inner DeliveryStore, poison string) *gatedStore {
	return &gatedStore{inner: inner, poison: poison, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedStore) InsertDeliveries(ctx context.Context, ds []store.Delivery, job func(int64) river.InsertManyParams) ([]store.DeliveryInsert, error) {
	g.mu.Lock()
	g.sizes = append(g.sizes, len(ds))
	g.mu.Unlock()
	g.once.Do(func() { close(g.entered); <-g.release })
	for _, d := range ds {
		if g.poison != "" && d.DedupeKey == "idem:"+g.poison {
			return nil, errors.New("the database refused delivery " + g.poison)
		}
	}
	return g.inner.InsertDeliveries(ctx, ds, job)
}

func (g *gatedStore) callSizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.sizes)
}

func newGroupHandler(t *testing.T, st DeliveryStore) *GitLabHandler {
	t.Helper()
	log, _ := newLogger(t)
	h, err := NewGitLabHandler(GitLabConfig{Secrets: []string{secretA}, Store: st, Decode: gitlab.DecodeHook,
		Logger: log, Metrics: NewMetrics(prometheus.NewRegistry()), StoreTimeout: time.Minute, NoteHasCommand: noteHasCommand,
		// One commit at a time, so that every request sent while the first
		// holds the store queues for the second (the batches are exact).
		MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return h
}

type sent struct {
	key    string
	status int
	answer answer
}

// sendAll sends first, waits until its commit holds the store, then sends
// rest at once and releases the store when all of them queue behind it.
func sendAll(t *testing.T, h *GitLabHandler, g *gatedStore, body []byte, first string, rest []string) []sent {
	t.Helper()
	out := make([]sent, 1+len(rest))
	var wg sync.WaitGroup
	send := func(i int, key string) {
		w := serve(h, delivery{event: evMR, token: secretA, idemKey: key, body: body})
		out[i] = sent{key: key, status: w.Code}
		if err := json.Unmarshal(w.Body.Bytes(), &out[i].answer); err != nil {
			t.Errorf("answer to %s: %v (%s)", key, err, w.Body)
		}
	}
	wg.Go(func() { send(0, first) })
	<-g.entered
	for i, key := range rest {
		wg.Go(func() { send(i+1, key) })
	}
	for h.intake.committer.commits.Queued() < len(rest) {
		time.Sleep(time.Millisecond)
	}
	close(g.release)
	wg.Wait()
	return out
}

// TestIntakeGroupCommitConcurrent (issue 12): many requests at once, the
// same delivery several times and distinct ones, through the real handler
// and store of each engine. They share commits (a batch of many queued
// behind the first), each delivery is stored once with one job, and every
// request gets its own delivery's answer: one accepted per delivery with
// its own id, the copies duplicate.
func TestIntakeGroupCommitConcurrent(t *testing.T) {
	t.Parallel()
	for _, e := range intakeEngines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			st, db := e.open(t)
			g := newGatedStore(st, "")
			h := newGroupHandler(t, g)
			body := readFixture(t, "webhook-merge_request-update-push.json")
			const senders, shared, unique = 12, 10, 4
			var rest []string
			for s := range senders {
				for k := range shared {
					rest = append(rest, fmt.Sprintf("shared-%d", (k+s)%shared))
				}
				for u := range unique {
					rest = append(rest, fmt.Sprintf("unique-%d-%d", s, u))
				}
			}
			got := sendAll(t, h, g, body, "first", rest)

			accepted := map[string][]int64{}
			for _, r := range got {
				switch {
				case r.status != http.StatusOK:
					t.Errorf("%s: status %d %+v", r.key, r.status, r.answer)
				case r.answer.Result == OutcomeAccepted:
					accepted[r.key] = append(accepted[r.key], r.answer.DeliveryID)
				case r.answer.Result != OutcomeDuplicate:
					t.Errorf("%s: answer %+v", r.key, r.answer)
				}
			}
			want := 1 + shared + senders*unique
			ids := map[int64]bool{}
			for key, got := range accepted {
				if len(got) != 1 {
					t.Errorf("%s accepted %d times (%v), want once", key, len(got), got)
				}
				for _, id := range got {
					if ids[id] {
						t.Errorf("delivery id %d answered to two deliveries", id)
					}
					ids[id] = true
				}
			}
			if len(accepted) != want {
				t.Errorf("%d deliveries accepted, want %d", len(accepted), want)
			}
			if n := db.count(t, `SELECT count(*) FROM webhook_deliveries`); n != want {
				t.Errorf("%d deliveries stored, want %d", n, want)
			}
			if n := db.count(t, `SELECT count(*) FROM river_job WHERE kind = 'process_delivery'`); n != want {
				t.Errorf("%d process_delivery jobs, want %d", n, want)
			}
			if n := db.count(t, db.jobsPerDelivery); n != want*1000000+want {
				t.Errorf("jobs joined to their deliveries: %d jobs for %d deliveries, want %d each", n/1000000, n%1000000, want)
			}
			sizes := g.callSizes()
			total := 0
			for _, n := range sizes {
				total += n
			}
			if total != len(got) || len(sizes) < 2 || slices.Max(sizes[1:]) < 2 {
				t.Errorf("commit sizes %v for %d requests: want every request in exactly one, and the queued ones sharing", sizes, len(got))
			}
			if slices.Max(sizes) > DefaultMaxBatch {
				t.Errorf("commit sizes %v: one above the bound %d", sizes, DefaultMaxBatch)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(h.intake.m.batch)
			mfs, err := reg.Gather()
			if err != nil || len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
				t.Fatalf("gathering the batch histogram: %v %v", mfs, err)
			}
			hist := mfs[0].GetMetric()[0].GetHistogram()
			if n, sum := hist.GetSampleCount(), hist.GetSampleSum(); n != uint64(len(sizes)) || sum != float64(total) {
				t.Errorf("changebot_webhook_commit_batch_size: %d transactions, %v deliveries; want %d, %d", n, sum, len(sizes), total)
			}
		})
	}
}

// TestIntakeGroupCommitFailedFlush (issue 12): a shared commit that fails
// because of one delivery answers every request: each other delivery is
// stored on its own and accepted, the refused one answers 503, and nothing
// is stored twice.
func TestIntakeGroupCommitFailedFlush(t *testing.T) {
	t.Parallel()
	for _, e := range intakeEngines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			st, db := e.open(t)
			g := newGatedStore(st, "poison")
			h := newGroupHandler(t, g)
			body := readFixture(t, "webhook-merge_request-update-push.json")
			rest := []string{"a", "b", "poison", "c", "a", "d"}
			got := sendAll(t, h, g, body, "first", rest)
			results := map[string][]string{}
			for _, r := range got {
				results[r.key] = append(results[r.key], fmt.Sprintf("%d %s%s", r.status, r.answer.Result, r.answer.Error))
			}
			for key, want := range map[string][]string{
				"first":  {"200 accepted"},
				"b":      {"200 accepted"},
				"c":      {"200 accepted"},
				"d":      {"200 accepted"},
				"a":      {"200 accepted", "200 duplicate"},
				"poison": {"503 storing the delivery failed; it was not accepted"},
			} {
				slices.Sort(results[key])
				if !slices.Equal(results[key], want) {
					t.Errorf("%s answered %q, want %q", key, results[key], want)
				}
			}
			if n := db.count(t, `SELECT count(*) FROM webhook_deliveries`); n != 5 {
				t.Errorf("%d deliveries stored, want 5 (first, a, b, c, d)", n)
			}
			if n := db.count(t, db.jobsPerDelivery); n != 5*1000000+5 {
				t.Errorf("jobs joined to their deliveries: %d jobs for %d deliveries, want 5 each", n/1000000, n%1000000)
			}
			// The shared commit of the 6 queued failed; each was retried alone.
			if sizes := g.callSizes(); !slices.Equal(sizes, []int{1, 6, 1, 1, 1, 1, 1, 1}) {
				t.Errorf("store calls of sizes %v, want [1 6] then six of 1", sizes)
			}
		})
	}
}

// TestIntakeIgnoredNoteStoresNothing (issue 12): a note without a command
// answers 200 ignored through the real handler and store, and writes
// nothing: no delivery, no job.
func TestIntakeIgnoredNoteStoresNothing(t *testing.T) {
	t.Parallel()
	for _, e := range intakeEngines() {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			st, db := e.open(t)
			h := newGroupHandler(t, st)
			note := readFixture(t, "webhook-note-mr.json")
			if !bytes.Contains(note, []byte(`"This MR needs work."`)) {
				t.Fatal("fixture note not found")
			}
			w := serve(h, delivery{event: evNote, token: secretA, idemKey: "no-command", body: note})
			if w.Code != http.StatusOK || w.Body.String() != `{"result":"ignored"}`+"\n" {
				t.Fatalf("answer %d %s, want 200 ignored", w.Code, w.Body)
			}
			if n := db.count(t, `SELECT count(*) FROM webhook_deliveries`); n != 0 {
				t.Errorf("%d deliveries stored, want none", n)
			}
			if n := db.count(t, `SELECT count(*) FROM river_job`); n != 0 {
				t.Errorf("%d jobs, want none", n)
			}
			// The same note with a command is stored: the test above is not
			// passing because nothing is ever stored.
			w = serve(h, delivery{event: evNote, token: secretA, idemKey: "command", body: commandNote(t)})
			if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"accepted"`)) {
				t.Fatalf("command note: %d %s, want accepted", w.Code, w.Body)
			}
			if n := db.count(t, `SELECT count(*) FROM river_job WHERE kind = '`+rules.KindProcessDelivery+`'`); n != 1 {
				t.Errorf("%d process_delivery jobs after the command note, want 1", n)
			}
		})
	}
}

// TestIntakeClosedRefuses: after Close (serve calls it once the HTTP server
// stopped) a delivery is not stored and answers 503, so GitLab shows it as
// failed rather than accepted.
func TestIntakeClosedRefuses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if err := e.h.(*GitLabHandler).Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := e.send(delivery{event: evMR, token: secretA, idemKey: "after-close", body: readFixture(t, "webhook-merge_request-update-push.json")})
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("answer %d %s, want 503", w.Code, w.Body)
	}
	if calls, _ := e.store.snapshot(); len(calls) != 0 {
		t.Errorf("%d deliveries reached the store after Close", len(calls))
	}
}
