// Package pgtest gives tests a real PostgreSQL schema of their own,
// migrated, at TEST_DATABASE_URL (default the local test database). It fails
// the test when the database is unreachable, except under -short where it
// skips (STYLE 33). It must only be imported by tests and the demo.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"changebot/store/postgres"
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

// New creates a fresh schema, migrated (changebot's and River's tables),
// and returns a pool whose connections use it. The schema is dropped when
// the test ends. The first call of a test process migrates a template
// schema and dumps it with pg_dump; later schemas are created from that
// dump in one transaction. Without pg_dump every schema is migrated.
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
	url := WithSearchPath(URL(), name)
	script, cloned := migratedScript()
	if cloned {
		// One transaction creates the schema, migrated.
		if err := runScript(ctx, url, strings.ReplaceAll(script, templateName, name)); err != nil {
			t.Fatalf("creating the migrated schema %s: %v", name, err)
		}
	} else if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("creating schema: %v", err)
	}
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
	if cloned {
		return Schema{Name: name, URL: url, Pool: pool}
	}
	if err := postgres.Migrate(ctx, pool, &postgres.MigrateOpts{Schema: name}); err != nil {
		t.Fatalf("migrating schema %s: %v", name, err)
	}
	return Schema{Name: name, URL: url, Pool: pool}
}

// templateName names the schema migrated once per test process; its dump,
// with this name replaced, creates every later schema in one transaction
// (a few times faster than running the migrations, which matters when a
// package's tests each want a schema).
var templateName = fmt.Sprintf("changebot_template_%d_%d", os.Getpid(), time.Now().UnixNano())

var template struct {
	once   sync.Once
	script string
	ok     bool
}

// migratedScript returns the SQL that recreates a freshly migrated schema
// named templateName (tables, types, functions, indexes and the migration
// bookkeeping rows), or ok=false when it cannot be made (no pg_dump on the
// PATH): New then runs the migrations itself.
func migratedScript() (string, bool) {
	template.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := exec.LookPath("pg_dump"); err != nil {
			return
		}
		admin, err := pgxpool.New(ctx, URL())
		if err != nil {
			return
		}
		defer admin.Close()
		if _, err := admin.Exec(ctx, "CREATE SCHEMA "+templateName); err != nil {
			return
		}
		defer func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+templateName+" CASCADE") }()
		pool, err := pgxpool.New(ctx, WithSearchPath(URL(), templateName))
		if err != nil {
			return
		}
		defer pool.Close()
		if err := postgres.Migrate(ctx, pool, &postgres.MigrateOpts{Schema: templateName}); err != nil {
			return
		}
		out, err := exec.CommandContext(ctx, "pg_dump", "--dbname", URL(), "--schema", templateName,
			"--inserts", "--no-owner", "--no-privileges").Output()
		if err != nil {
			return
		}
		var b strings.Builder
		b.WriteString("BEGIN;\n")
		for line := range strings.Lines(string(out)) {
			if !strings.HasPrefix(line, `\`) { // psql meta-commands (\restrict)
				b.WriteString(line)
			}
		}
		b.WriteString("COMMIT;\n")
		template.script, template.ok = b.String(), true
	})
	return template.script, template.ok
}

// runScript runs a multi-statement SQL script on a connection of its own
// (the script's SET commands die with it).
func runScript(ctx context.Context, url, script string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.PgConn().Exec(ctx, script).ReadAll()
	return err
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

// WaitBlockedBy returns once some database session waits for a lock that
// the backend pid holds (pg_blocking_pids), so a test can show a competitor
// really waits on a transaction. It fails t when done receives first (the
// competitor finished without waiting) or after 30 s.
func WaitBlockedBy(t testing.TB, pool *pgxpool.Pool, pid int, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		select {
		case err := <-done:
			t.Fatalf("finished without waiting for the lock: %v", err)
		default:
		}
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&n); err != nil {
			t.Fatalf("looking for the blocked session: %v", err)
		}
		if n > 0 {
			return
		}
	}
}
