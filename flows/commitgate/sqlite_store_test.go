package commitgate_test

import (
	"context"
	"path/filepath"
	"testing"

	"changebot/flows/commitgate"
	"changebot/store/sqlite"
)

// TestDBStoreContractOnSQLite runs the Store contract on the database
// store over SQLite (issue 11 point 4: the commit gate's store on both
// engines, same contract tests).
func TestDBStoreContractOnSQLite(t *testing.T) {
	t.Parallel()
	runStoreContract(t, func(t *testing.T) commitgate.Store {
		db, err := sqlite.OpenDB(filepath.Join(t.TempDir(), "gate.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if err := sqlite.Migrate(context.Background(), db, nil); err != nil {
			t.Fatal(err)
		}
		st, err := sqlite.New(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		return commitgate.NewDBStore(st, st.DB())
	})
}
