package database

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"changebot/store/postgres"
)

// RefuseServed refuses a PostgreSQL database that a replica serves: one
// leads its job queue (River elects a leader among running clients and
// renews it every few seconds; a stopped replica resigns, a killed one's
// term runs out within about a minute). On SQLite it returns nil: the
// file's lock (OpenOpts.Exclusive) keeps a serve out.
func (d *DB) RefuseServed(ctx context.Context) error {
	if d.pool == nil {
		return nil
	}
	var leader string
	var until time.Time
	err := d.pool.QueryRow(ctx, `SELECT leader_id, expires_at FROM river_leader WHERE expires_at > now() LIMIT 1`).Scan(&leader, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking whether a replica serves the database: %w", err)
	}
	return fmt.Errorf("replica %s is serving this database (it leads the job queue until %s): stop every replica before copying",
		leader, until.UTC().Format(time.RFC3339))
}

// DropSchema drops the PostgreSQL schema with everything in it (the
// demo's own schema, at its end).
func DropSchema(ctx context.Context, databaseURL, schema string) error {
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("connecting to the database: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		return fmt.Errorf("dropping schema %s: %w", schema, err)
	}
	return nil
}

// ResetSchema drops and recreates the PostgreSQL schema and migrates it
// (the demo's own schema, at its start).
func ResetSchema(ctx context.Context, databaseURL, schema string) error {
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("connecting to the database: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		return fmt.Errorf("dropping schema %s: %w", schema, err)
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return fmt.Errorf("creating schema %s: %w", schema, err)
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("parsing database url: %w", errors.New("invalid DATABASE_URL"))
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	sp, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connecting to schema %s: %w", schema, err)
	}
	defer sp.Close()
	return postgres.Migrate(ctx, sp, &postgres.MigrateOpts{Schema: schema})
}
