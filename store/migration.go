package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	"github.com/riverqueue/river/rivermigrate"
)

// MigrateParams are the arguments of RunMigrations.
type MigrateParams struct {
	// Down reverts every migration instead (ours, then River's).
	Down bool
	// To, when above 0, moves changebot's migrations up or down to exactly
	// this version and leaves River's alone (tests of one migration).
	To uint
}

// RunMigrations is the migration rule of every engine: it applies
// changebot's numbered migrations (ours: golang-migrate over the engine's
// embedded files) and then River's own (river), or with p.Down reverts
// ours and then River's; with p.To it moves ours alone. Each engine's
// Migrate builds the two migrators over its database. It is idempotent.
func RunMigrations[TTx any](ctx context.Context, ours *migrate.Migrate, river *rivermigrate.Migrator[TTx], p MigrateParams) error {
	if p.To > 0 {
		if err := ours.Migrate(p.To); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("migrating to version %d: %w", p.To, err)
		}
		return nil
	}
	if p.Down {
		if err := ours.Down(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("reverting migrations: %w", err)
		}
		if _, err := river.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1}); err != nil {
			return fmt.Errorf("reverting job queue migrations: %w", err)
		}
		return nil
	}
	if err := ours.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("applying migrations: %w", err)
	}
	if _, err := river.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("applying job queue migrations: %w", err)
	}
	return nil
}

// MigrationState reports the applied version of changebot's migrations
// (ours), and whether it is latest, the newest embedded one, and applied
// whole: a migration that failed half-way leaves it dirty, not current.
// 0 and false when none is applied.
func MigrationState(ours *migrate.Migrate, latest uint) (version uint, current bool, err error) {
	v, dirty, err := ours.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading migration version: %w", err)
	}
	return v, !dirty && v == latest, nil
}

// LatestMigration returns the number of the newest migration in dir of
// fsys, read from the file names (NNNN_name.up.sql), so adding a migration
// needs no other edit. It panics when dir cannot be read: fsys is an
// engine's embedded files.
func LatestMigration(fsys fs.FS, dir string) uint {
	entries, err := fs.ReadDir(fsys, dir)
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
}
