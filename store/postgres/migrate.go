package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"changebot/store"
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
	return store.RunMigrations(ctx, m, rm, store.MigrateParams{Down: opts.Down, To: opts.To})
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
	return store.MigrationState(m, LatestMigration)
}

// LatestMigration is the number of the newest embedded migration
// (store/postgres/migrations, store.LatestMigration).
var LatestMigration = store.LatestMigration(migrationFiles, "migrations")

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
