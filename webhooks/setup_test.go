package webhooks

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/riverqueue/river"

	"changebot/internal/fixture"
	"changebot/internal/guard"
	"changebot/platform/gitlab"
	"changebot/store"
)

const (
	secretA = "hook-secret-aaaaaaaaaaaa"
	secretB = "hook-secret-bbbbbbbbbbbb"
	// bodyMarker is put in bodies that must never reach an answer or a log.
	bodyMarker = "b0dy-m4rker-never-echoed"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	return fixture.GitLab(t, name)
}

// commandNote is the MR note fixture with a command on its first line: a
// note the intake stores (one without a command is answered ignored).
func commandNote(t testing.TB) []byte {
	t.Helper()
	note := readFixture(t, "webhook-note-mr.json")
	body := bytes.Replace(note, []byte(`"This MR needs work."`), []byte(`"/retry\nThis MR needs work."`), 1)
	if bytes.Equal(body, note) {
		t.Fatal("fixture note not found")
	}
	return body
}

// noteHasCommand stands in for commands.MayHoldCommand (webhooks never
// import commands; bot wires the real one, and commands tests it): a note
// starting with "/" holds a command.
func noteHasCommand(body string) bool { return strings.HasPrefix(body, "/") }

// fakeStore is a hand-written, state-based DeliveryStore: it records every
// call, dedupes by key like the real store, and fails when err is set.
type fakeStore struct {
	mu      sync.Mutex
	calls   []store.Delivery
	stored  map[string]int64
	jobs    []river.InsertManyParams
	nextID  int64
	err     error
	ctxErrs []error // ctx.Err() seen at each call
}

func newFakeStore() *fakeStore { return &fakeStore{stored: map[string]int64{}} }

func (s *fakeStore) InsertDeliveries(ctx context.Context, ds []store.Delivery, job func(id int64) river.InsertManyParams) ([]store.DeliveryInsert, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, ds...)
	s.ctxErrs = append(s.ctxErrs, ctx.Err())
	if s.err != nil {
		return nil, s.err
	}
	out := make([]store.DeliveryInsert, len(ds))
	for i, d := range ds {
		if _, ok := s.stored[d.DedupeKey]; ok {
			continue
		}
		s.nextID++
		s.stored[d.DedupeKey] = s.nextID
		s.jobs = append(s.jobs, job(s.nextID))
		out[i] = store.DeliveryInsert{ID: s.nextID, Inserted: true}
	}
	return out, nil
}

func (s *fakeStore) snapshot() (calls []store.Delivery, jobs []river.InsertManyParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.Delivery(nil), s.calls...), append([]river.InsertManyParams(nil), s.jobs...)
}

// logBuffer collects log output (to check what is never logged) and
// mirrors it to t.Log (STYLE 29).
type logBuffer struct {
	t   testing.TB
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newLogger(t testing.TB) (*slog.Logger, *logBuffer) {
	lb := &logBuffer{t: t}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// env is the shared fixture of the GitLab handler tests.
type env struct {
	t     *testing.T
	h     http.Handler
	store *fakeStore
	m     *Metrics
	reg   *prometheus.Registry
	logs  *logBuffer
}

func setup(t *testing.T, mutate ...func(*GitLabConfig)) *env {
	t.Helper()
	e := &env{t: t, store: newFakeStore(), reg: prometheus.NewRegistry()}
	e.m = NewMetrics(e.reg)
	var log *slog.Logger
	log, e.logs = newLogger(t)
	cfg := GitLabConfig{
		Secrets:      []string{secretA, secretB},
		MaxBodyBytes: 64 << 10,
		Store:        e.store,
		Decode:       gitlab.DecodeHook,
		Logger:       log,
		Metrics:      e.m,

		NoteHasCommand: noteHasCommand,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h, err := NewGitLabHandler(cfg)
	if err != nil {
		t.Fatalf("NewGitLabHandler: %v", err)
	}
	e.h = h
	return e
}

// delivery is one request to the GitLab handler.
type delivery struct {
	method  string // POST when empty
	event   string
	token   string
	idemKey string
	body    []byte
	chunked bool // no Content-Length
}

func (e *env) send(d delivery) *httptest.ResponseRecorder {
	e.t.Helper()
	return serve(e.h, d)
}

// guarded serves h behind the HTTP guard, as bot's router does: a
// handler's panic is the guard's (it answers 500; onPanic counts).
func guarded(h http.Handler) http.Handler { return guard.HTTP(guard.Config{}, h) }

func serve(h http.Handler, d delivery) *httptest.ResponseRecorder {
	method := d.method
	if method == "" {
		method = http.MethodPost
	}
	r := httptest.NewRequest(method, "/webhooks/gitlab", bytes.NewReader(d.body))
	if d.chunked {
		r.ContentLength = -1
		r.Body = readerOnly{bytes.NewReader(d.body)}
	}
	r.Header.Set("Content-Type", "application/json")
	if d.event != "" {
		r.Header.Set("X-Gitlab-Event", d.event)
	}
	if d.token != "" {
		r.Header.Set("X-Gitlab-Token", d.token)
	}
	if d.idemKey != "" {
		r.Header.Set("Idempotency-Key", d.idemKey)
	}
	w := httptest.NewRecorder()
	guarded(h).ServeHTTP(w, r)
	return w
}

type readerOnly struct{ r *bytes.Reader }

func (r readerOnly) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r readerOnly) Close() error               { return nil }

// count returns changebot_webhook_deliveries_total{event,outcome}.
func (e *env) count(event, outcome string) float64 {
	return testutil.ToFloat64(e.m.deliveries.WithLabelValues(event, outcome))
}

// totalDeliveries sums changebot_webhook_deliveries_total over all labels.
func totalCount(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// errStore is returned by the failing fake store.
var errStore = errors.New("connection refused")
