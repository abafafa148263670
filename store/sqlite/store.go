package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"
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

// Store is the SQLite store: the contract's rules (store.DriverStore,
// every method of store.Store) over this package's driver.
type Store struct {
	*store.DriverStore
	db *sql.DB
}

var _ store.Store = (*Store)(nil)

// New returns a store over db (see OpenDB). Its driver holds an
// insert-only River client, so that every write can enqueue its follow-up
// jobs in the same transaction.
func New(db *sql.DB, opts *StoreOpts) (*Store, error) {
	if opts == nil {
		opts = &StoreOpts{}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	jobs, err := river.NewClient(riversqlite.New(db), &river.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("building job inserter: %w", err)
	}
	d := &driver{db: db, jobs: jobs, hub: hubOf(db)}
	rules := store.NewDriverStore(d, &store.DriverStoreOpts{NowFunc: opts.NowFunc})
	d.now = rules.Now
	return &Store{DriverStore: rules, db: db}, nil
}

// SQLDB returns the underlying database.
func (s *Store) SQLDB() *sql.DB { return s.db }

// WriteConcurrency is 1: SQLite has one writer at a time (a second write
// transaction waits for the lock), so the webhook intake commits its
// batches one after the other (webhooks' group commit asks it).
func (s *Store) WriteConcurrency() int { return 1 }

// driver is the SQLite store.Driver: one database file, its transactions
// (each BEGIN IMMEDIATE, see OpenDB) and the River client that inserts jobs
// in them.
type driver struct {
	db   *sql.DB
	jobs *river.Client[*sql.Tx] // insert-only client, enqueues in our transactions
	hub  *settingsHub
	// now is the store's clock: SQLite has no clock of its own at the
	// store's precision, so it stands for the database's
	// (CommitClaimInsert).
	now func() time.Time
}

// Engine implements store.Driver.
func (*driver) Engine() string { return engine }

// Name implements store.Driver.
func (*driver) Name() string { return "SQLite" }

// DB implements store.Driver.
func (d *driver) DB() store.DBTX { return dbHandle{d.db} }

// Ping implements store.Driver.
func (d *driver) Ping(ctx context.Context) error { return d.db.PingContext(ctx) }

// InTx implements store.Driver: BEGIN IMMEDIATE (OpenDB), so the
// transaction holds the write lock until it ends. What the transaction
// queued for after its commit (SettingsNotify) runs once it committed.
func (d *driver) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	var after []func()
	if err := fn(txHandle{tx: tx, after: &after}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	for _, f := range after {
		f()
	}
	return nil
}

// ReadTx implements store.Driver as InTx: the write lock keeps every
// writer out while it reads.
func (d *driver) ReadTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return d.InTx(ctx, fn)
}

// Executor implements store.Driver.
func (d *driver) Executor(db store.DBTX) (store.Executor, error) {
	switch h := db.(type) {
	case dbHandle:
		return executor{ex: h.db, d: d}, nil
	case txHandle:
		return executor{ex: h.tx, tx: h.tx, after: h.after, d: d}, nil
	case nil:
		return nil, fmt.Errorf("no database handle given to the %s store", engine)
	default:
		return nil, fmt.Errorf("a %s database handle given to the %s store", h.Engine(), engine)
	}
}

// executor is the SQLite store.Executor of one handle.
type executor struct {
	ex execer  // the database or the transaction
	tx *sql.Tx // the transaction; nil on the database
	// after collects what runs once the transaction committed; nil on the
	// database and on a transaction of TxOf: it runs at once.
	after *[]func()
	d     *driver
}

var _ store.Executor = executor{}

// afterCommit runs f once the executor's transaction committed (at once
// without one to wait for).
func (x executor) afterCommit(f func()) {
	if x.after == nil {
		f()
		return
	}
	*x.after = append(*x.after, f)
}

// JobInsertMany implements store.JobQueries.
func (x executor) JobInsertMany(ctx context.Context, jobs []river.InsertManyParams) ([]*rivertype.JobInsertResult, error) {
	if x.tx == nil {
		return nil, errNoTx
	}
	return x.d.jobs.InsertManyTx(ctx, x.tx, jobs)
}

// JobList implements store.JobQueries.
func (x executor) JobList(ctx context.Context, p *river.JobListParams) (*river.JobListResult, error) {
	if x.tx == nil {
		return nil, errNoTx
	}
	return x.d.jobs.JobListTx(ctx, x.tx, p)
}

// errNoTx refuses River's calls outside a transaction.
var errNoTx = errors.New("jobs are inserted and listed in a transaction only")

// noRows is err, or store.ErrNotFound for database/sql's "no rows".
func noRows(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// isUnique reports whether err is a violated unique constraint.
func isUnique(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
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

// ListenSettings implements store.Driver: a listener of the settings
// changes saved through any store on this database in this process. Close
// it when done.
func (d *driver) ListenSettings(ctx context.Context) (store.SettingsListener, error) {
	l := &listener{hub: d.hub, c: make(chan store.SettingsNotice, 1)}
	d.hub.mu.Lock()
	d.hub.listeners[l] = struct{}{}
	d.hub.mu.Unlock()
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
