package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrateOpts are optional arguments of Migrate; nil means defaults.
type MigrateOpts struct {
	// Schema is the schema to migrate (tests); empty means search_path.
	Schema string
	// Down reverts every migration instead (ours, then River's).
	Down bool
	// To, when above 0, moves changebot's migrations up or down to exactly
	// this version and leaves River's alone (tests of one migration).
	To uint
}

// Migrate applies changebot's numbered migrations (store/migrations, via
// golang-migrate) and River's own, in that order; reverts both with Down.
// It is idempotent.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts *MigrateOpts) error {
	if opts == nil {
		opts = &MigrateOpts{}
	}
	rm, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: opts.Schema})
	if err != nil {
		return fmt.Errorf("preparing job queue migrations: %w", err)
	}
	m, closeFn, err := newMigrator(pool, opts.Schema)
	if err != nil {
		return err
	}
	defer closeFn()
	if opts.To > 0 {
		if err := m.Migrate(opts.To); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("migrating to version %d: %w", opts.To, err)
		}
		return nil
	}
	if opts.Down {
		if err := m.Down(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("reverting migrations: %w", err)
		}
		if _, err := rm.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1}); err != nil {
			return fmt.Errorf("reverting job queue migrations: %w", err)
		}
		return nil
	}
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("applying migrations: %w", err)
	}
	if _, err := rm.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("applying job queue migrations: %w", err)
	}
	return nil
}

// MigrationStatus reports the applied version of changebot's migrations,
// whether it is the newest embedded one, and whether a migration failed
// half-way (dirty).
func MigrationStatus(pool *pgxpool.Pool, schema string) (version uint, current bool, err error) {
	m, closeFn, err := newMigrator(pool, schema)
	if err != nil {
		return 0, false, err
	}
	defer closeFn()
	v, dirty, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading migration version: %w", err)
	}
	return v, !dirty && v == LatestMigration, nil
}

// LatestMigration is the number of the newest embedded migration, read
// from the file names in store/migrations (NNNN_name.up.sql), so adding a
// migration needs no other edit.
var LatestMigration = func() uint {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(fmt.Sprintf("store: reading embedded migrations: %v", err))
	}
	var latest uint
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if n, err := strconv.ParseUint(num, 10, 32); ok && err == nil && uint(n) > latest {
			latest = uint(n)
		}
	}
	return latest
}()

// newMigrator returns a migrator and the function that releases its
// connection (the pool cannot close while the migration driver holds one).
func newMigrator(pool *pgxpool.Pool, schema string) (*migrate.Migrate, func(), error) {
	src, err := iofs.New(migrationFiles, "migrations")
	if err != nil {
		return nil, nil, fmt.Errorf("reading embedded migrations: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	drv, err := migratepgx.WithInstance(db, &migratepgx.Config{SchemaName: schema, MigrationsTable: "changebot_schema_migrations"})
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("opening migration driver: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("preparing migrations: %w", err)
	}
	return m, func() { _, _ = m.Close(); _ = db.Close() }, nil
}
