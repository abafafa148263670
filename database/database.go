// Package database opens the database a DATABASE_URL names
// (config.ParseDatabaseTarget), of either engine: PostgreSQL through a pgx
// pool, or a SQLite file, locked to one process. On it, it builds the store,
// applies and reverts the migrations and makes the job queue's River
// client. It is the one place besides the store implementations that sees
// a database driver; it holds no SQL of changebot's tables (that is the
// store's) and no business rules.
package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	"changebot/config"
	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/sqlite"
)

// ErrSecondProcess is the whole error of a process that finds the SQLite
// file in use by another.
var ErrSecondProcess = errors.New("another changebot process is using this SQLite database; " +
	"SQLite serves one replica only: several replicas need PostgreSQL (DATABASE_URL=postgres://…)")

// DB is one open database of either engine and what is built on it:
// the store, the migrations and the job queue's client.
type DB struct {
	target config.DatabaseTarget
	schema string        // PostgreSQL schema; empty means search_path
	pool   *pgxpool.Pool // postgres
	sqlDB  *sql.DB       // sqlite
	lock   *os.File      // sqlite with exclusive: the held lock file
}

// OpenOpts are the optional settings of Open; nil means defaults.
type OpenOpts struct {
	// Schema is the PostgreSQL schema holding every table: it becomes the
	// search_path. Empty means the connection's own.
	Schema string
	// Exclusive makes Open take, on a SQLite file, an exclusive lock on
	// <file>.lock first (serve, migrate, copy).
	Exclusive bool
	// Tracer, when set (benchmarks), traces every query of the PostgreSQL
	// pool.
	Tracer pgx.QueryTracer
}

// Open opens the database DATABASE_URL url names. For SQLite with
// o.Exclusive it first takes an exclusive lock on <file>.lock and returns
// ErrSecondProcess when another process holds it (the lock is the
// operating system's, so it goes with the process, SIGKILL included).
func Open(ctx context.Context, url string, o *OpenOpts) (*DB, error) {
	if o == nil {
		o = &OpenOpts{}
	}
	t, err := config.ParseDatabaseTarget(url)
	if err != nil {
		return nil, err
	}
	schema, exclusive := o.Schema, o.Exclusive
	d := &DB{target: t, schema: schema}
	if t.Engine == config.EngineSQLite {
		if dir := filepath.Dir(t.Path); dir != "" {
			if err := os.MkdirAll(dir, 0o750); err != nil {
				return nil, fmt.Errorf("creating the directory of %s: %w", t.Path, err)
			}
		}
		if exclusive {
			if d.lock, err = lockFile(resolvedPath(t.Path) + ".lock"); err != nil {
				return nil, err
			}
		}
		if d.sqlDB, err = sqlite.OpenDB(t.Path); err != nil {
			d.Close()
			return nil, err
		}
		return d, nil
	}
	cfg, err := pgxpool.ParseConfig(t.URL)
	if err != nil {
		return nil, fmt.Errorf("parsing database url: %w", errors.New("invalid DATABASE_URL"))
	}
	if schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
	}
	cfg.ConnConfig.Tracer = o.Tracer
	if d.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("connecting to the database: %w", err)
	}
	return d, nil
}

// OpenExisting is Open without the lock, for the commands that read (list,
// settings, history, replay, verify) and the checks of doctor and setup: a
// SQLite file that does not exist is an error (they must not create an
// empty database that serve would find later). schema is OpenOpts.Schema.
func OpenExisting(ctx context.Context, url, schema string) (*DB, error) {
	t, err := config.ParseDatabaseTarget(url)
	if err != nil {
		return nil, err
	}
	if t.Engine == config.EngineSQLite {
		if _, err := os.Stat(t.Path); err != nil {
			return nil, fmt.Errorf("no SQLite database at %s yet (serve creates it): %w", t.Path, err)
		}
	}
	return Open(ctx, url, &OpenOpts{Schema: schema})
}

// resolvedPath is path with its symbolic links resolved, so a second
// serve given another name of one database file (a symlink to it, or to
// its directory) takes the same lock: a link at path is followed even when
// its target does not exist yet (sql.Open creates the file only on first
// use), then the directory's links are resolved and the name joined. A
// path that cannot be resolved is returned cleaned as it is.
func resolvedPath(path string) string {
	for range 40 { // the kernel's own limit on nested links is 40
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			break
		}
		target, err := os.Readlink(path)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		return filepath.Join(dir, filepath.Base(path))
	}
	return filepath.Clean(path)
}

// lockFile takes an exclusive, non-blocking flock on path (creating it).
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is locked: %w", path, ErrSecondProcess)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}

// Describe names the database for a log line or a person: the engine and
// the file, or the redacted PostgreSQL URL.
func (d *DB) Describe() string {
	if d.target.Engine == config.EngineSQLite {
		return "sqlite " + d.target.Path
	}
	return "postgres " + config.RedactDatabaseURL(d.target.URL)
}

// ErrNoSchema is wrapped by the error of a command that finds none of
// changebot's tables (a database never migrated, or a DATABASE_URL or
// search_path naming another database or schema than the migrated one).
var ErrNoSchema = errors.New("no changebot schema")

// ExplainMissingSchema replaces err, when a query failed because a table
// does not exist (PostgreSQL SQLSTATE 42P01 undefined_table, SQLite "no
// such table"), with one that names the database (password left out) and
// says to run changebot migrate (ErrNoSchema); when a column does not exist
// (42703, "no such column") and the tables are at an older migration than
// this binary's, with one that says so and to migrate (ErrSchemaBehind);
// other errors are returned as they are.
// The commands that only read (list, settings, history, replay, verify)
// call it on their error rather than checking the migration version first:
// opening the migrator creates its version table, a write those commands
// must not make, and the error costs nothing when the schema is there.
func (d *DB) ExplainMissingSchema(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	missing := errors.As(err, &pgErr) && pgErr.Code == pgUndefinedTable
	if !missing && d.target.Engine == config.EngineSQLite {
		missing = strings.Contains(err.Error(), "no such table")
	}
	column := (pgErr != nil && pgErr.Code == pgUndefinedColumn) ||
		(d.target.Engine == config.EngineSQLite && strings.Contains(err.Error(), "no such column"))
	if column {
		// The tables are there but older than this binary: a database
		// migrated by an older release, or reverted with migrate -down.
		// The version table exists then, so reading it writes nothing.
		if version, _, serr := d.MigrationStatus(); serr == nil && version < d.LatestMigration() {
			return &behindError{where: d.Describe(), version: version, latest: d.LatestMigration(), err: err}
		}
	}
	if !missing {
		return err
	}
	where := d.Describe()
	if d.schema != "" {
		where += " (schema " + d.schema + ")"
	}
	hint := "this DATABASE_URL or its search_path names another database or schema"
	if d.target.Engine == config.EngineSQLite {
		hint = "this DATABASE_URL names another file"
	}
	return &noSchemaError{where: where, hint: hint, err: err}
}

// pgUndefinedTable is PostgreSQL's SQLSTATE undefined_table ("relation
// ... does not exist").
const pgUndefinedTable = "42P01"

// pgUndefinedColumn is PostgreSQL's SQLSTATE undefined_column ("column
// ... does not exist").
const pgUndefinedColumn = "42703"

// ErrSchemaBehind is wrapped by the error of a command that finds
// changebot's tables at an older migration than this binary's.
var ErrSchemaBehind = errors.New("changebot schema behind this binary")

// behindError is ExplainMissingSchema's error for tables at an older
// migration: it matches ErrSchemaBehind and keeps the database's own error
// for errors.As, out of the message.
type behindError struct {
	where           string
	version, latest uint
	err             error
}

func (e *behindError) Error() string {
	return fmt.Sprintf("%s is at migration %d of %d: run changebot migrate (doctor says so too)", e.where, e.version, e.latest)
}

func (e *behindError) Is(target error) bool { return target == ErrSchemaBehind }

func (e *behindError) Unwrap() error { return e.err }

// noSchemaError is explainMissingSchema's error: it matches ErrNoSchema and
// keeps the database's own error for errors.As, out of the message.
type noSchemaError struct {
	where, hint string
	err         error
}

func (e *noSchemaError) Error() string {
	return "the database at " + e.where + " has no changebot schema; run `changebot migrate` with the same DATABASE_URL " +
		"(if it was migrated, " + e.hint + ")"
}

func (e *noSchemaError) Unwrap() []error { return []error{ErrNoSchema, e.err} }

// Store returns a store on the database logging to log (nil: nowhere).
func (d *DB) Store(log *slog.Logger) (store.Store, error) {
	if d.sqlDB != nil {
		return sqlite.New(d.sqlDB, &sqlite.StoreOpts{Logger: log})
	}
	return postgres.New(d.pool, &postgres.StoreOpts{Logger: log, Schema: d.schema})
}

// Migrate applies every migration (ours and River's).
func (d *DB) Migrate(ctx context.Context) error {
	if d.sqlDB != nil {
		return sqlite.Migrate(ctx, d.sqlDB, nil)
	}
	return postgres.Migrate(ctx, d.pool, &postgres.MigrateOpts{Schema: d.schema})
}

// ErrSQLiteDownTo is why a SQLite database reverts to 0 only: its
// migrator (store/sqlite) reverts all of changebot's migrations and the job
// queue's, not down to one version.
var ErrSQLiteDownTo = errors.New("a SQLite database reverts to 0 only (every migration, the job queue's tables too; " +
	"-down 0 -yes, then changebot migrate, rebuilds it empty); reverting to one version needs PostgreSQL")

// MigrateDown reverts changebot's migrations to version to; 0 reverts all
// of them and River's. On SQLite only 0 is a version to revert to
// (ErrSQLiteDownTo).
func (d *DB) MigrateDown(ctx context.Context, to uint) error {
	if d.sqlDB != nil {
		if to != 0 {
			return fmt.Errorf("-down %d: %w", to, ErrSQLiteDownTo)
		}
		return sqlite.Migrate(ctx, d.sqlDB, &sqlite.MigrateOpts{Down: true})
	}
	opts := &postgres.MigrateOpts{Schema: d.schema, To: to}
	if to == 0 {
		opts = &postgres.MigrateOpts{Schema: d.schema, Down: true}
	}
	return postgres.Migrate(ctx, d.pool, opts)
}

// MigrationStatus reports the applied version of changebot's migrations
// and whether it is the newest (and not dirty).
func (d *DB) MigrationStatus() (version uint, current bool, err error) {
	if d.sqlDB != nil {
		return sqlite.MigrationStatus(d.sqlDB)
	}
	return postgres.MigrationStatus(d.pool, d.schema)
}

// LatestMigration is the newest migration of the engine.
func (d *DB) LatestMigration() uint {
	if d.sqlDB != nil {
		return sqlite.LatestMigration
	}
	return postgres.LatestMigration
}

// JobClient is what the bot calls on the River client of either engine.
type JobClient interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	StopAndCancel(ctx context.Context) error
	ID() string
}

// NewJobClient returns a River client of the engine with cfg (Schema is
// set for PostgreSQL).
func (d *DB) NewJobClient(cfg *river.Config) (JobClient, error) {
	if d.sqlDB != nil {
		return river.NewClient(riversqlite.New(d.sqlDB), cfg)
	}
	cfg.Schema = d.schema
	var c *river.Client[pgx.Tx]
	c, err := river.NewClient(riverpgxv5.New(d.pool), cfg)
	return c, err
}

// Engine is the database's engine: config.EnginePostgres or
// config.EngineSQLite.
func (d *DB) Engine() string { return d.target.Engine }

// Target is what the DATABASE_URL the database was opened with names.
func (d *DB) Target() config.DatabaseTarget { return d.target }

// SQLite is the SQLite file's handle, nil on PostgreSQL (benchmarks count
// rows with it).
func (d *DB) SQLite() *sql.DB { return d.sqlDB }

// Close closes the database and releases the lock.
func (d *DB) Close() {
	if d.pool != nil {
		d.pool.Close()
	}
	if d.sqlDB != nil {
		_ = d.sqlDB.Close()
	}
	if d.lock != nil {
		_ = d.lock.Close() // closing the descriptor releases the flock
	}
}
