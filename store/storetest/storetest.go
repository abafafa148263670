// Package storetest gives tests a real PostgreSQL schema of their own,
// migrated, at TEST_DATABASE_URL (default the local test database). It fails
// the test when the database is unreachable, except under -short where it
// skips (STYLE 33). It must only be imported by tests and the demo.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"changebot/store"
)

// DefaultURL is the local test database used when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns TEST_DATABASE_URL or DefaultURL.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Schema is a migrated schema of one test.
type Schema struct {
	Name string
	// URL connects with search_path set to the schema (for subprocesses).
	URL  string
	Pool *pgxpool.Pool
}

// New creates a fresh schema, migrates it (changebot's and River's tables)
// and returns a pool whose connections use it. The schema is dropped when
// the test ends.
func New(t testing.TB) Schema {
	t.Helper()
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, URL())
	if err == nil {
		err = admin.Ping(ctx)
	}
	if err != nil {
		if testing.Short() {
			t.Skipf("database unreachable under -short: %v", err)
		}
		t.Fatalf("database tests need PostgreSQL at %s (set TEST_DATABASE_URL): %v", URL(), err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("creating schema: %v", err)
	}
	url := WithSearchPath(URL(), name)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("parsing database url: %v", err)
	}
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE")
		admin.Close()
	})
	if err := store.Migrate(ctx, pool, &store.MigrateOpts{Schema: name}); err != nil {
		t.Fatalf("migrating schema %s: %v", name, err)
	}
	return Schema{Name: name, URL: url, Pool: pool}
}

// WithSearchPath returns url with search_path set to schema.
func WithSearchPath(url, schema string) string {
	sep := "?"
	for i := 0; i < len(url); i++ {
		if url[i] == '?' {
			sep = "&"
			break
		}
	}
	return url + sep + "search_path=" + schema
}
