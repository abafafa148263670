package postgres_test

import (
	"context"
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

// BenchmarkPasses runs the reconciler's and the sweeper's queries over
// 100,000 finished changes on PostgreSQL (storetest.BenchmarkPasses), with
// the table analyzed as autovacuum would.
func BenchmarkPasses(b *testing.B) {
	var sc pgtest.Schema
	storetest.BenchmarkPasses(b, func(t testing.TB) func(storetest.Opts) store.Store {
		sc = pgtest.New(t)
		return func(o storetest.Opts) store.Store {
			s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name, NowFunc: o.NowFunc})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}, func(t testing.TB) {
		if _, err := sc.Pool.Exec(context.Background(), `ANALYZE `+sc.Name+`.operations`); err != nil {
			t.Fatal(err)
		}
	})
}
