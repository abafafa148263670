package bot

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"changebot/config"
	"changebot/demo"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// syncBuffer is a bytes.Buffer safe for the App's concurrent log writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// emptySchema creates a schema without any table (no migration) and drops
// it when the test ends.
func emptySchema(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, pgtest.URL())
	if err == nil {
		err = admin.Ping(ctx)
	}
	if err != nil {
		if testing.Short() {
			t.Skipf("database unreachable under -short: %v", err)
		}
		t.Fatalf("database tests need PostgreSQL at %s: %v", pgtest.URL(), err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t_empty_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("creating schema: %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE")
		admin.Close()
	})
	return name
}

// migrateSchema applies the migrations to schema.
func migrateSchema(t *testing.T, schema string) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.WithSearchPath(pgtest.URL(), schema))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := postgres.Migrate(ctx, pool, &postgres.MigrateOpts{Schema: schema}); err != nil {
		t.Fatalf("migrating: %v", err)
	}
}

// TestServeWithoutMigrations starts the bot on a database whose migrations
// were never applied: it keeps serving (liveness 200), /readyz answers 503
// naming `changebot migrate`, one error log line says so, and Run returns
// no error when stopped. Migrating it meanwhile makes it ready.
func TestServeWithoutMigrations(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	schema := emptySchema(t)
	env.Config.DatabaseURL = pgtest.URL()
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(io.MultiWriter(&logs, tlogWriter{t}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	app, err := NewApp(context.Background(), env.Config, &AppOpts{Logger: log, Schema: schema, Poll: demo.Poll})
	if err != nil {
		t.Fatalf("NewApp: %v", err)
	}
	defer app.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, env.Listener) }()

	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			select {
			case err := <-done:
				t.Fatalf("Run returned while serving: %v", err)
			default:
			}
			resp, err := client.Get(env.BaseURL + path)
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp.StatusCode, string(body)
			}
			select {
			case err := <-done:
				t.Fatalf("Run returned while serving: %v", err)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s, want 200", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "run changebot migrate") {
		t.Errorf("/readyz: %d %s, want 503 naming changebot migrate", code, body)
	}
	// Still alive once the job workers have failed to start on the
	// unmigrated schema (they retry in the background).
	waitFor(t, 15*time.Second, "the job workers to wait for the migrations", func() bool {
		return strings.Contains(logs.String(), "job workers wait for the migrations")
	})
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz later: %d, want 200", code)
	}

	// Once migrated, the same replica becomes ready and starts its job
	// workers and its settings reloads succeed, without a restart.
	migrateSchema(t, schema)
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(logs.String(), "job workers started") || !strings.Contains(logs.String(), "settings loaded again") {
		if time.Now().After(deadline) {
			t.Fatalf("no job workers and settings after the migration:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after migrating: %d %s, want 200", code, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	var hints int
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=ERROR") && strings.Contains(line, "changebot migrate") {
			hints++
		}
	}
	if hints != 1 {
		t.Errorf("%d error lines naming changebot migrate, want 1:\n%s", hints, logs.String())
	}
}

// TestCLIOnUnmigratedDatabase runs the commands that read the database
// against a SQLite file and a PostgreSQL schema that were never migrated:
// each says the database (password masked) has no changebot schema and to
// run changebot migrate, instead of the engine's "no such table" or
// 'relation "operations" does not exist', and writes nothing. Not parallel:
// it sets the environment.
func TestCLIOnUnmigratedDatabase(t *testing.T) {
	clearConfigEnv(t)
	file := filepath.Join(t.TempDir(), "changebot.db")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	schema := emptySchema(t)
	pgURL := strings.Replace(pgtest.WithSearchPath(pgtest.URL(), schema), "postgres@", "postgres:s3cret@", 1)
	if !strings.Contains(pgURL, "s3cret@") {
		t.Fatalf("no password put in %s", pgURL)
	}
	commands := [][]string{{"list"}, {"list", "-status", "MERGED"}, {"settings", "get"}, {"settings", "set", "poll.short_count", "3"},
		{"history", "op-1"}, {"replay", "op-1"}, {"verify"}}
	for _, engine := range []struct{ name, url, where string }{
		{"sqlite", config.SQLiteURL(file), "sqlite " + file},
		{"postgres", pgURL, "postgres postgres://postgres:xxxxx@"},
	} {
		t.Setenv("DATABASE_URL", engine.url)
		for _, args := range commands {
			var out, errOut bytes.Buffer
			code := cliMain(args, &out, &errOut)
			got := out.String() + errOut.String()
			if code != 1 {
				t.Errorf("%s %v: exit %d, want 1 (%s)", engine.name, args, code, got)
			}
			for _, w := range []string{"the database at " + engine.where, "has no changebot schema", "run `changebot migrate`"} {
				if !strings.Contains(got, w) {
					t.Errorf("%s %v: output %q lacks %q", engine.name, args, got, w)
				}
			}
			for _, raw := range []string{"no such table", "does not exist", "SQLSTATE", "s3cret"} {
				if strings.Contains(got, raw) {
					t.Errorf("%s %v: output %q shows %q", engine.name, args, got, raw)
				}
			}
		}
	}
	admin, err := pgxpool.New(context.Background(), pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var tables int
	if err := admin.QueryRow(context.Background(),
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, schema).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("the commands created %d tables in the unmigrated schema", tables)
	}
}
