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
