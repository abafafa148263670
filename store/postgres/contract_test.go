package postgres_test

import (
	"testing"

	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
	"changebot/store/storetest"
)

// TestContract runs the store contract suite on PostgreSQL, a schema per
// case.
func TestContract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t testing.TB) func(storetest.Opts) store.Store {
		sc := pgtest.New(t)
		return func(o storetest.Opts) store.Store {
			s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name, NowFunc: o.NowFunc})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}
