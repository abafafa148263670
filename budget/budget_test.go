package budget_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"changebot/budget"
	"changebot/platform"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
	"changebot/store/sqlite"
)

// stores opens a migrated store of each engine.
func stores(t *testing.T) map[string]budget.Store {
	t.Helper()
	m := map[string]budget.Store{}
	for engine, pair := range storePairs(t) {
		m[engine] = pair[0]
	}
	return m
}

// storePairs opens, for each engine, two stores over one migrated
// database: two replicas.
func storePairs(t *testing.T) map[string][2]budget.Store {
	t.Helper()
	sc := pgtest.New(t)
	var pgs, lites [2]budget.Store
	db, err := sqlite.OpenDB(filepath.Join(t.TempDir(), "changebot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := sqlite.Migrate(context.Background(), db, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		pg, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
		if err != nil {
			t.Fatal(err)
		}
		lite, err := sqlite.New(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		pgs[i], lites[i] = pg, lite
	}
	return map[string][2]budget.Store{"postgres": pgs, "sqlite": lites}
}

// TestTakeCall: with 60 calls a minute, a burst of 3 and a reserve of 2, a
// person's calls take the whole burst and then wait the second one call
// takes to flow back; a background call is held while the budget holds
// no more than the reserve and waits until reserve + 1 calls are there;
// with the budget off every call is granted.
func TestTakeCall(t *testing.T) {
	t.Parallel()
	for engine, st := range stores(t) {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			limits := budget.Limits{PerMinute: 60, Burst: 3, Reserve: 2}
			b, err := budget.New(budget.Config{Store: st, NowFunc: func() time.Time { return now },
				LimitsFunc: func() budget.Limits { return limits }})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			take := func(p platform.Priority) (time.Duration, float64) {
				t.Helper()
				wait, left, err := b.TakeCall(ctx, "robot", p)
				if err != nil {
					t.Fatal(err)
				}
				return wait, left
			}
			if got := b.Left(); len(got) != 0 {
				t.Fatalf("calls left before any take: %v, want none known", got)
			}
			if wait, left := take(platform.PriorityBackground); wait != 0 || left != 2 {
				t.Fatalf("a background call from a full budget of 3: wait %s, left %v", wait, left)
			}
			// The overview's figure: what the bucket held after the take
			// (its lease of one call spent at once).
			if got := b.Left(); len(got) != 1 || got["robot"] != 2 {
				t.Fatalf("calls left after one take of 3: %v, want robot: 2", got)
			}
			if wait, _ := take(platform.PriorityBackground); wait != time.Second {
				t.Fatalf("a background call at the reserve (2): wait %s, want 1s (one call to flow back)", wait)
			}
			for i := range 2 {
				if wait, _ := take(platform.PriorityPerson); wait != 0 {
					t.Fatalf("person call %d from the reserve waited %s", i+1, wait)
				}
			}
			if wait, _ := take(platform.PriorityPerson); wait != time.Second {
				t.Fatalf("a person's call from an empty budget: wait %s, want 1s", wait)
			}
			if wait, _ := take(platform.PriorityBackground); wait != 3*time.Second {
				t.Fatalf("a background call from an empty budget: wait %s, want 3s (reserve + 1)", wait)
			}
			limits = budget.Limits{}
			for i := range 5 {
				if wait, _ := take(platform.PriorityBackground); wait != 0 {
					t.Fatalf("budget off: call %d waited %s", i+1, wait)
				}
			}
		})
	}
}
