package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/golang-migrate/migrate/v4"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"changebot/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrateOpts are optional arguments of Migrate; nil means defaults.
type MigrateOpts struct {
	// Down reverts every migration instead (ours, then River's).
	Down bool
}

// Migrate applies changebot's numbered migrations (store/sqlite/migrations,
// via golang-migrate) and River's own (riversqlite), in that order; reverts
// both with Down. It is idempotent.
func Migrate(ctx context.Context, db *sql.DB, opts *MigrateOpts) error {
	if opts == nil {
		opts = &MigrateOpts{}
	}
	rm, err := rivermigrate.New(riversqlite.New(db), nil)
	if err != nil {
		return fmt.Errorf("preparing job queue migrations: %w", err)
	}
	m, err := newMigrator(db)
	if err != nil {
		return err
	}
	return store.RunMigrations(ctx, m, rm, store.MigrateParams{Down: opts.Down})
}

// MigrationStatus reports the applied version of changebot's migrations,
// whether it is the newest embedded one, and whether a migration failed
// half-way (dirty).
func MigrationStatus(db *sql.DB) (version uint, current bool, err error) {
	m, err := newMigrator(db)
	if err != nil {
		return 0, false, err
	}
	return store.MigrationState(m, LatestMigration)
}

// LatestMigration is the number of the newest embedded migration
// (store/sqlite/migrations, store.LatestMigration).
var LatestMigration = store.LatestMigration(migrationFiles, "migrations")

// newMigrator returns a migrator over db. It is not closed: closing the
// golang-migrate driver would close db, which belongs to the caller.
func newMigrator(db *sql.DB) (*migrate.Migrate, error) {
	src, err := iofs.New(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("reading embedded migrations: %w", err)
	}
	drv, err := migratesqlite.WithInstance(db, &migratesqlite.Config{MigrationsTable: "changebot_schema_migrations"})
	if err != nil {
		return nil, fmt.Errorf("opening migration driver: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "sqlite", drv)
	if err != nil {
		return nil, fmt.Errorf("preparing migrations: %w", err)
	}
	return m, nil
}
