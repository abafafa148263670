package storecopy_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
	"changebot/store/sqlite"
	"changebot/store/storecopy"
	"changebot/store/storetest"
)

func openSQLite(t testing.TB, o storetest.Opts) storetest.Copier {
	t.Helper()
	db, err := sqlite.OpenDB(filepath.Join(t.TempDir(), "changebot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := sqlite.Migrate(context.Background(), db, nil); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	s, err := sqlite.New(db, &sqlite.StoreOpts{NowFunc: o.NowFunc})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openPostgres(t testing.TB, o storetest.Opts) storetest.Copier {
	t.Helper()
	sc := pgtest.New(t)
	s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name, NowFunc: o.NowFunc})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRoundTrip runs the copy contract (storetest.RunCopy) both ways
// between the two engines.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	t.Run("sqlite to postgres", func(t *testing.T) {
		t.Parallel()
		storetest.RunCopy(t, openSQLite, openPostgres)
	})
	t.Run("postgres to sqlite", func(t *testing.T) {
		t.Parallel()
		storetest.RunCopy(t, openPostgres, openSQLite)
	})
}

// TestCopy: Copy reports the rows of every table and the operations it
// verified on the target, and refuses a target that is not empty without
// writing to it.
func TestCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := openSQLite(t, storetest.Opts{})
	storetest.FillInstallation(t, src)
	dst := openPostgres(t, storetest.Opts{})
	rep, err := storecopy.Copy(ctx, src, dst)
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if rep.Verified != 2 {
		t.Errorf("verified %d operations, want 2", rep.Verified)
	}
	got := map[string]int{}
	for _, c := range rep.Counts {
		got[c.Table] = c.Rows
	}
	want := map[string]int{"operations": 2, "bindings": 2, "change_events": 4, "webhook_deliveries": 3,
		"settings": 1, "settings_audit": 2, "commit_claims": 2}
	for table, n := range want {
		if got[table] != n {
			t.Errorf("%s: %d rows copied, want %d", table, got[table], n)
		}
	}
	if got[store.JobsTable] < 4 {
		t.Errorf("%d jobs copied, want at least the 2 step jobs and 2 delivery jobs", got[store.JobsTable])
	}
	_, err = storecopy.Copy(ctx, src, dst)
	var full *store.NotEmptyError
	if !errors.As(err, &full) {
		t.Errorf("a second Copy into the same target: %v, want a NotEmptyError", err)
	}
}

// BenchmarkCopySQLiteToPostgres copies a SQLite installation of 200
// operations with 10 events each (and their jobs) to a fresh PostgreSQL
// schema per iteration.
func BenchmarkCopySQLiteToPostgres(b *testing.B) {
	ctx := context.Background()
	src := openSQLite(b, storetest.Opts{})
	for i := range 200 {
		id := fmt.Sprintf("op_bench_%03d", i)
		if _, _, err := src.CreateOperation(ctx, store.CreateParams{Operation: store.Operation{ID: id, SubjectID: id,
			TargetKey: "prod", Project: "g/r", Title: "t", RequestedBy: "alice", Step: 10401, Status: store.StatusApprovalSending},
			Event: store.EventParams{Type: store.EventSubmitted, Actor: "alice", Source: "api"}}); err != nil {
			b.Fatal(err)
		}
		for j := range 9 {
			if _, err := src.AppendEvent(ctx, id, store.EventParams{Type: store.EventAttempt, Actor: "changebot", Source: "job:x",
				Payload: map[string]any{"n": j, "reason": "GitLab answered 502"}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dst := openPostgres(b, storetest.Opts{})
		b.StartTimer()
		rep, err := storecopy.Copy(ctx, src, dst)
		if err != nil || rep.Verified != 200 {
			b.Fatalf("Copy: %v (verified %d)", err, rep.Verified)
		}
	}
}

// TestExportRefusesWhatItDoesNotKnow: a table no copy knows (SQLite) and
// a column store.CopyTables does not list (PostgreSQL) stop the export
// instead of being left behind.
func TestExportRefusesWhatItDoesNotKnow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lite := openSQLite(t, storetest.Opts{}).(*sqlite.Store)
	if _, err := lite.SQLDB().ExecContext(ctx, `CREATE TABLE deploy_windows (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	var unknown *store.UnknownTableError
	if _, err := lite.Export(ctx); !errors.As(err, &unknown) || len(unknown.Tables) != 1 || unknown.Tables[0] != "deploy_windows" {
		t.Errorf("SQLite export with a new table: %v, want an UnknownTableError naming deploy_windows", err)
	}
	pg := openPostgres(t, storetest.Opts{}).(*postgres.Store)
	if _, err := pg.Pool().Exec(ctx, `ALTER TABLE bindings ADD COLUMN note text`); err != nil {
		t.Fatal(err)
	}
	var mismatch *store.SchemaMismatchError
	if _, err := pg.Export(ctx); !errors.As(err, &mismatch) || mismatch.Table != "bindings" {
		t.Errorf("PostgreSQL export with a new column: %v, want a SchemaMismatchError of bindings", err)
	}
}
