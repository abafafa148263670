package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	migratesqlite "github.com/golang-migrate/migrate/v4/database/sqlite"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
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
func MigrationStatus(db *sql.DB) (version uint, current bool, err error) {
	m, err := newMigrator(db)
	if err != nil {
		return 0, false, err
	}
	v, dirty, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading migration version: %w", err)
	}
	return v, !dirty && v == LatestMigration, nil
}

// LatestMigration is the number of the newest embedded migration.
var LatestMigration = func() uint {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(fmt.Sprintf("store/sqlite: reading embedded migrations: %v", err))
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
