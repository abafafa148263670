package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"changebot/store"
	"changebot/store/sqlite"
	"changebot/store/storetest"
)

// open makes a migrated database file of its own for t.
func open(t testing.TB) func(storetest.Opts) store.Store {
	t.Helper()
	db, err := sqlite.OpenDB(filepath.Join(t.TempDir(), "changebot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := sqlite.Migrate(context.Background(), db, nil); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	return func(o storetest.Opts) store.Store {
		s, err := sqlite.New(db, &sqlite.StoreOpts{NowFunc: o.NowFunc})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// TestContract runs the store contract suite on SQLite, a file per case.
func TestContract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, open)
}

// BenchmarkPasses runs the reconciler's and the sweeper's queries over
// 100,000 finished changes on SQLite (storetest.BenchmarkPasses).
func BenchmarkPasses(b *testing.B) {
	var path string
	storetest.BenchmarkPasses(b, func(t testing.TB) func(storetest.Opts) store.Store {
		path = filepath.Join(t.TempDir(), "changebot.db")
		db, err := sqlite.OpenDB(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if err := sqlite.Migrate(context.Background(), db, nil); err != nil {
			t.Fatalf("migrating: %v", err)
		}
		return func(o storetest.Opts) store.Store {
			s, err := sqlite.New(db, &sqlite.StoreOpts{NowFunc: o.NowFunc})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}, func(t testing.TB) {
		db, err := sqlite.OpenDB(path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(context.Background(), `ANALYZE`); err != nil {
			t.Fatal(err)
		}
	})
}
