package bot

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"changebot/store/postgres/pgtest"
)

// TestDemoDropsItsSchemaWhenItsOutputCloses runs `changebot demo` on
// PostgreSQL in a subprocess whose standard output is a pipe closed after
// the first line, as `changebot demo | head -1` does: the process must not
// die of SIGPIPE with its changebot_demo_<hex> schema left behind, but stop
// (exit 1, saying why) after dropping the schema.
func TestDemoDropsItsSchemaWhenItsOutputCloses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, pgtest.URL())
	if err == nil {
		err = admin.Ping(ctx)
	}
	if err != nil {
		// As every database test: a skip only under -short, else a failure
		// (issue 21.19: CI must not pass with this test unrun).
		if testing.Short() {
			t.Skipf("database unreachable under -short: %v", err)
		}
		t.Fatalf("needs PostgreSQL at %s (set TEST_DATABASE_URL): %v", pgtest.URL(), err)
	}
	t.Cleanup(admin.Close) // after the schema's drop below (cleanups run last first)

	cmd := exec.Command(os.Args[0], "demo", "-timeout=60s")
	cmd.Env = append(os.Environ(), "CHANGEBOT_TEST_SUBPROCESS=1", "DATABASE_URL="+pgtest.URL())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("reading the demo's first line: %v", err)
	}
	m := regexp.MustCompile(`schema (changebot_demo_[0-9a-f]+)`).FindStringSubmatch(first)
	if m == nil {
		_ = cmd.Process.Kill()
		t.Fatalf("the first line names no schema: %q", first)
	}
	schema := m[1]
	t.Cleanup(func() { _, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	_ = stdout.Close() // the reader goes away, as head does

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the demo did not stop after its output closed; stderr:\n%s", stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("exit: %v, want exit status 1 (a SIGPIPE death shows as -1); stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "writing the demo's output failed") {
		t.Errorf("stderr does not say why the demo stopped:\n%s", stderr.String())
	}
	var left int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("schema %s is left behind after the demo's output closed", schema)
	}
}
