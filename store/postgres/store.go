package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
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

// Store is the PostgreSQL store: the contract's rules (store.DriverStore,
// every method of store.Store) over this package's driver.
type Store struct {
	*store.DriverStore
	pool *pgxpool.Pool
}

// New returns a store over pool. Its driver holds an insert-only River
// client, so that every write can enqueue its follow-up jobs in the same
// transaction.
func New(pool *pgxpool.Pool, opts *StoreOpts) (*Store, error) {
	if opts == nil {
		opts = &StoreOpts{}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// FetchCooldown is also how often this client may announce inserts in
	// one queue (pg_notify at commit): with River's default (100 ms) the
	// jobs of a transaction committed within 100 ms of another's were not
	// announced and waited for the workers' fetch poll (1 s). At the minimum
	// every transaction that enqueues announces its jobs.
	jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: opts.Schema, Logger: logger,
		FetchCooldown: river.FetchCooldownMin})
	if err != nil {
		return nil, fmt.Errorf("building job inserter: %w", err)
	}
	d := &driver{pool: pool, jobs: jobs}
	return &Store{DriverStore: store.NewDriverStore(d, &store.DriverStoreOpts{NowFunc: opts.NowFunc}), pool: pool}, nil
}

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// driver is the PostgreSQL store.Driver: a pool, its transactions and the
// River client that inserts jobs in them.
type driver struct {
	pool *pgxpool.Pool
	jobs *river.Client[pgx.Tx] // insert-only client, enqueues in our transactions
}

// Engine implements store.Driver.
func (*driver) Engine() string { return engine }

// Name implements store.Driver.
func (*driver) Name() string { return "PostgreSQL" }

// DB implements store.Driver: statements run on the pool.
func (d *driver) DB() store.DBTX { return poolHandle{d.pool} }

// InTx implements store.Driver: a READ COMMITTED transaction.
func (d *driver) InTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return fn(txHandle{tx}) })
}

// ReadTx implements store.Driver: a REPEATABLE READ, READ ONLY
// transaction.
func (d *driver) ReadTx(ctx context.Context, fn func(tx store.Tx) error) error {
	return pgx.BeginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(txHandle{tx}) })
}

// Ping implements store.Driver.
func (d *driver) Ping(ctx context.Context) error { return d.pool.Ping(ctx) }

// Executor implements store.Driver.
func (d *driver) Executor(db store.DBTX) (store.Executor, error) {
	switch h := db.(type) {
	case poolHandle:
		return executor{q: h.pool, jobs: d.jobs}, nil
	case txHandle:
		return executor{q: h.tx, tx: h.tx, jobs: d.jobs}, nil
	case nil:
		return nil, fmt.Errorf("no database handle given to the %s store", engine)
	default:
		return nil, fmt.Errorf("a %s database handle given to the %s store", h.Engine(), engine)
	}
}

// executor is the PostgreSQL store.Executor of one handle.
type executor struct {
	q    querier // the pool or the transaction
	tx   pgx.Tx  // the transaction; nil on the pool
	jobs *river.Client[pgx.Tx]
}

var _ store.Executor = executor{}

// JobInsertMany implements store.JobQueries.
func (x executor) JobInsertMany(ctx context.Context, jobs []river.InsertManyParams) ([]*rivertype.JobInsertResult, error) {
	if x.tx == nil {
		return nil, errNoTx
	}
	return x.jobs.InsertManyTx(ctx, x.tx, jobs)
}

// JobList implements store.JobQueries.
func (x executor) JobList(ctx context.Context, p *river.JobListParams) (*river.JobListResult, error) {
	if x.tx == nil {
		return nil, errNoTx
	}
	return x.jobs.JobListTx(ctx, x.tx, p)
}

// errNoTx refuses River's calls outside a transaction.
var errNoTx = errors.New("jobs are inserted and listed in a transaction only")

// noRows is err, or store.ErrNotFound for pgx's "no rows".
func noRows(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// limit is n as the int4 of a LIMIT.
func limit(n int) int32 { return int32(min(n, math.MaxInt32)) }
