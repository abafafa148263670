package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"changebot/store"
	"changebot/store/sqlite/internal/dbsqlc"
)

// queries are the generated queries (internal/dbsqlc, from the .sql files
// there; make sqlc). They hold no state: each call takes its handle.
var queries = dbsqlc.New()

// BusyTimeout is how long a statement waits for another connection's
// write lock before failing with SQLITE_BUSY.
const BusyTimeout = 10 * time.Second

// Synchronous is the SQLite synchronous setting OpenDB applies: FULL, so
// that every commit the bot has answered 2xx for (a webhook delivery, a
// callback, a submit) is on the disk before the answer. In WAL mode NORMAL
// syncs only at checkpoints, so an operating-system crash or a power loss
// can undo commits already acknowledged (https://sqlite.org/pragma.html#pragma_synchronous);
// its cost is measured in BENCHMARKS.md.
const Synchronous = "FULL"

// OpenDB opens (creating it if needed) the database file at path with the
// settings the store relies on: WAL journal (readers never wait for the
// writer), BEGIN IMMEDIATE for every transaction (a transaction takes the
// write lock at its start, so two writers never deadlock on an upgrade:
// the second waits, as a PostgreSQL row lock would make it), foreign keys,
// synchronous=Synchronous and a busy timeout of BusyTimeout.
func OpenDB(path string) (*sql.DB, error) {
	v := url.Values{}
	v.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	v.Add("_pragma", "journal_mode(WAL)")
	v.Add("_pragma", "foreign_keys(1)")
	v.Add("_pragma", "synchronous("+Synchronous+")")
	v.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+v.Encode())
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return db, nil
}

// StoreOpts are optional settings of New; nil means defaults.
type StoreOpts struct {
	Logger *slog.Logger
	// NowFunc is the clock; UTC is applied at the boundary.
	NowFunc func() time.Time
}

// Store is the SQLite implementation of store.Store.
type Store struct {
	db     *sql.DB
	jobs   *river.Client[*sql.Tx] // insert-only client, enqueues in our transactions
	logger *slog.Logger
	now    func() time.Time
	hub    *settingsHub
}

var _ store.Store = (*Store)(nil)

// New returns a store over db (see OpenDB). It builds an insert-only River
// client so that every write can enqueue its follow-up jobs in the same
// transaction.
func New(db *sql.DB, opts *StoreOpts) (*Store, error) {
	if opts == nil {
		opts = &StoreOpts{}
	}
	s := &Store{db: db, logger: opts.Logger, now: opts.NowFunc, hub: hubOf(db)}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	jobs, err := river.NewClient(riversqlite.New(db), &river.Config{Logger: s.logger})
	if err != nil {
		return nil, fmt.Errorf("building job inserter: %w", err)
	}
	s.jobs = jobs
	return s, nil
}

// SQLDB returns the underlying database.
func (s *Store) SQLDB() *sql.DB { return s.db }

// DB implements store.Handles.
func (s *Store) DB() store.DBTX { return dbHandle{s.db} }

// Now returns the store clock's time in UTC, truncated to the microseconds
// the store keeps, so values read back compare equal.
func (s *Store) Now() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// InTx runs fn in one transaction (BEGIN IMMEDIATE: it holds the write
// lock until it ends), committing when fn returns nil and rolling back when
// it returns an error (which InTx returns as is).
func (s *Store) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.inTx(ctx, func(tx *sql.Tx) error { return fn(txHandle{tx}) })
}

func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

// enqueue inserts jobs in tx. Empty jobs is a no-op.
func (s *Store) enqueue(ctx context.Context, tx *sql.Tx, jobs []river.InsertManyParams) error {
	if len(jobs) == 0 {
		return nil
	}
	if _, err := s.jobs.InsertManyTx(ctx, tx, jobs); err != nil {
		return fmt.Errorf("enqueueing %d jobs: %w", len(jobs), err)
	}
	return nil
}

// isUnique reports whether err is a violated unique constraint.
func isUnique(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

func marshalFiles(files []store.File) ([]byte, error) {
	if files == nil {
		files = []store.File{}
	}
	return json.Marshal(files)
}

// settingsHub delivers settings announcements to the listeners of one
// database in this process (SQLite has no LISTEN/NOTIFY; one process owns
// the file).
type settingsHub struct {
	mu        sync.Mutex
	listeners map[*listener]struct{}
}

var hubs sync.Map // *sql.DB -> *settingsHub

func hubOf(db *sql.DB) *settingsHub {
	h, _ := hubs.LoadOrStore(db, &settingsHub{listeners: map[*listener]struct{}{}})
	return h.(*settingsHub)
}

func (h *settingsHub) announce(n store.SettingsNotice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.listeners {
		select {
		case l.c <- n:
		default: // a notice is waiting already: the listener reloads everything
		}
	}
}

// listener is a store.SettingsListener of the hub.
type listener struct {
	hub *settingsHub
	c   chan store.SettingsNotice
}

// ListenSettings returns a listener of the settings changes saved through
// any store on this database in this process. Close it when done.
func (s *Store) ListenSettings(ctx context.Context) (store.SettingsListener, error) {
	l := &listener{hub: s.hub, c: make(chan store.SettingsNotice, 1)}
	s.hub.mu.Lock()
	s.hub.listeners[l] = struct{}{}
	s.hub.mu.Unlock()
	return l, nil
}

// Wait implements store.SettingsListener.
func (l *listener) Wait(ctx context.Context) (store.SettingsNotice, error) {
	select {
	case n := <-l.c:
		return n, nil
	case <-ctx.Done():
		return store.SettingsNotice{}, fmt.Errorf("waiting for settings notification: %w", ctx.Err())
	}
}

// Close implements store.SettingsListener.
func (l *listener) Close(context.Context) error {
	l.hub.mu.Lock()
	delete(l.hub.listeners, l)
	l.hub.mu.Unlock()
	return nil
}
