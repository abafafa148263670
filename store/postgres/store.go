package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// queries are the generated queries (internal/dbsqlc, from the .sql files
// there; make sqlc). They hold no state: each call takes its handle.
var queries = dbsqlc.New()

// StoreOpts are optional settings of New; nil means defaults.
type StoreOpts struct {
	Logger *slog.Logger
	// NowFunc is the clock; UTC is applied at the boundary.
	NowFunc func() time.Time
	// Schema is the PostgreSQL schema of River's tables (tests use one
	// schema per test); empty means search_path.
	Schema string
}

// Store is the PostgreSQL implementation.
type Store struct {
	pool   *pgxpool.Pool
	jobs   *river.Client[pgx.Tx] // insert-only client, enqueues in our transactions
	logger *slog.Logger
	now    func() time.Time
}

// New returns a store over pool. It builds an insert-only River client so
// that every write can enqueue its follow-up jobs in the same transaction.
func New(pool *pgxpool.Pool, opts *StoreOpts) (*Store, error) {
	if opts == nil {
		opts = &StoreOpts{}
	}
	s := &Store{pool: pool, logger: opts.Logger, now: opts.NowFunc}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	// FetchCooldown is also how often this client may announce inserts in
	// one queue (pg_notify at commit): with River's default (100 ms) the
	// jobs of a transaction committed within 100 ms of another's were not
	// announced and waited for the workers' fetch poll (1 s). At the minimum
	// every transaction that enqueues announces its jobs.
	jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: opts.Schema, Logger: s.logger,
		FetchCooldown: river.FetchCooldownMin})
	if err != nil {
		return nil, fmt.Errorf("building job inserter: %w", err)
	}
	s.jobs = jobs
	return s, nil
}

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Now returns the store clock's time in UTC, truncated to PostgreSQL's
// microsecond precision so values read back compare equal.
func (s *Store) Now() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// DB returns the store's own handle: each statement of a method given it
// runs on its own (autocommit).
func (s *Store) DB() store.DBTX { return poolHandle{s.pool} }

// InTx runs fn in one transaction, committing when fn returns nil and
// rolling back when it returns an error (which InTx returns as is).
func (s *Store) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error { return fn(txHandle{tx}) })
}

// inTx runs fn in one pgx transaction.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// enqueue inserts jobs in tx. Empty jobs is a no-op.
func (s *Store) enqueue(ctx context.Context, tx pgx.Tx, jobs []river.InsertManyParams) error {
	if len(jobs) == 0 {
		return nil
	}
	if _, err := s.jobs.InsertManyTx(ctx, tx, jobs); err != nil {
		return fmt.Errorf("enqueueing %d jobs: %w", len(jobs), err)
	}
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

func marshalFiles(files []store.File) ([]byte, error) {
	if files == nil {
		files = []store.File{}
	}
	return json.Marshal(files)
}

var _ store.Store = (*Store)(nil)
