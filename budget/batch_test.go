package budget_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"changebot/budget"
	"changebot/platform"
	"changebot/store"
)

// counting counts the statements a Budget sends to its store.
type counting struct {
	st budget.Store
	n  atomic.Int64
}

func (c *counting) AccountBlockedUntil(ctx context.Context, account string) (time.Time, error) {
	c.n.Add(1)
	return c.st.AccountBlockedUntil(ctx, account)
}

func (c *counting) BlockAccountUntil(ctx context.Context, account string, until time.Time) error {
	c.n.Add(1)
	return c.st.BlockAccountUntil(ctx, account, until)
}

func (c *counting) TakeAccountBudget(ctx context.Context, p store.BudgetTakeParams) (store.BudgetTake, error) {
	c.n.Add(1)
	return c.st.TakeAccountBudget(ctx, p)
}

func (c *counting) ClampAccountBudget(ctx context.Context, p store.BudgetClampParams) error {
	c.n.Add(1)
	return c.st.ClampAccountBudget(ctx, p)
}

func newBudget(t *testing.T, st budget.Store, now time.Time, l budget.Limits) *budget.Budget {
	t.Helper()
	b, err := budget.New(budget.Config{Store: st, NowFunc: func() time.Time { return now },
		LimitsFunc: func() budget.Limits { return l }})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTakeCallBatches: K calls from a full bucket cost about K/MaxBatch
// statements (calls are leased in batches), not K; with the budget off K
// calls read the account's wait about once (cached), not K times; a 429
// recorded through the budget holds the next call at once and costs its
// one write; a 429 another replica records is seen within one lease.
func TestTakeCallBatches(t *testing.T) {
	t.Parallel()
	const k = 200
	for engine, st := range stores(t) {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			cs := &counting{st: st}
			b := newBudget(t, cs, now, budget.Limits{PerMinute: 600, Burst: 1000, Reserve: 100})
			for i := range k {
				if wait, _, err := b.TakeCall(ctx, "robot", platform.PriorityPerson); err != nil || wait != 0 {
					t.Fatalf("call %d: wait %s, err %v", i+1, wait, err)
				}
			}
			if got, most := cs.n.Load(), int64(k/budget.MaxBatch+2); got > most {
				t.Fatalf("%d calls cost %d statements, want at most %d (batches of %d)", k, got, most, budget.MaxBatch)
			}

			// A 429 met by this replica: held at once, one write.
			before := cs.n.Load()
			if err := b.BlockAccountUntil(ctx, "robot", now.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if wait, _, err := b.TakeCall(ctx, "robot", platform.PriorityPerson); err != nil || wait != time.Minute {
				t.Fatalf("after a 429: wait %s, err %v; want 1m", wait, err)
			}
			if got := cs.n.Load() - before; got != 1 {
				t.Fatalf("recording a 429 and a held call cost %d statements, want 1 (the write)", got)
			}

			// Budget off: the wait is read once for k calls.
			off := &counting{st: st}
			b2 := newBudget(t, off, now.Add(2*time.Minute), budget.Limits{})
			for range k {
				if wait, _, err := b2.TakeCall(ctx, "robot", platform.PriorityBackground); err != nil || wait != 0 {
					t.Fatalf("budget off: wait %s, err %v", wait, err)
				}
			}
			if got := off.n.Load(); got >= k/2 {
				t.Fatalf("budget off: %d calls read the wait %d times, want about once (cached)", k, got)
			}
		})
	}
}

// TestTakeCallOtherReplicas429: a 429 recorded by another replica holds
// this replica's calls after at most the calls left in its lease.
func TestTakeCallOtherReplicas429(t *testing.T) {
	t.Parallel()
	for engine, st := range stores(t) {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			l := budget.Limits{PerMinute: 600, Burst: 1000}
			a, other := newBudget(t, st, now, l), newBudget(t, st, now, l)
			for range 3 { // the second and third take lease a batch
				if _, _, err := a.TakeCall(ctx, "robot", platform.PriorityPerson); err != nil {
					t.Fatal(err)
				}
			}
			if err := other.BlockAccountUntil(ctx, "robot", now.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			for i := range budget.MaxBatch + 1 {
				wait, _, err := a.TakeCall(ctx, "robot", platform.PriorityPerson)
				if err != nil {
					t.Fatal(err)
				}
				if wait > 0 {
					return
				}
				if i == budget.MaxBatch {
					t.Fatalf("%d calls granted after another replica's 429, want at most a lease (%d)", i+1, budget.MaxBatch)
				}
			}
		})
	}
}

// TestTakeCallTwoReplicasConcurrent: two replicas (two Budgets, two
// stores over one database), 8 goroutines each, take from a bucket of 300
// that does not refill (the clock stands still) until held: together they
// are granted no more than 300 calls, background calls none of the
// reserve's 100, and the leases leave at most a batch per replica and
// priority unspent.
func TestTakeCallTwoReplicasConcurrent(t *testing.T) {
	t.Parallel()
	for engine, pair := range storePairs(t) {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			l := budget.Limits{PerMinute: 60, Burst: 300, Reserve: 100}
			replicas := []*budget.Budget{newBudget(t, pair[0], now, l), newBudget(t, pair[1], now, l)}
			var person, background atomic.Int64
			run := func(p platform.Priority, granted *atomic.Int64) {
				var wg sync.WaitGroup
				for _, b := range replicas {
					for range 8 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for {
								wait, _, err := b.TakeCall(ctx, "robot", p)
								if err != nil {
									t.Error(err)
									return
								}
								if wait > 0 {
									return
								}
								granted.Add(1)
							}
						}()
					}
				}
				wg.Wait()
			}
			run(platform.PriorityBackground, &background)
			if got := background.Load(); got > 200 || got < 200-2*budget.MaxBatch {
				t.Fatalf("background calls granted %d, want at most 200 (reserve 100 of 300 kept) and no fewer than %d", got, 200-2*budget.MaxBatch)
			}
			run(platform.PriorityPerson, &person)
			if total := background.Load() + person.Load(); total > 300 || total < 300-4*budget.MaxBatch {
				t.Fatalf("granted %d calls (%d background), want at most 300 and no fewer than %d", total, background.Load(), 300-4*budget.MaxBatch)
			}
		})
	}
}

// TestCachesExpireOnTheCacheClock: a lease is spent without a statement
// until LeaseTTL has passed on the cache clock, then the next call takes
// from the store again; with the budget off, the account's wait is read
// again once WaitCacheTTL has passed on it, not before. The bucket's clock
// (NowFunc) stands still throughout, as a flow harness's does.
func TestCachesExpireOnTheCacheClock(t *testing.T) {
	t.Parallel()
	type step struct {
		advance time.Duration // the cache clock moves this much before the call
		want    int64         // statements the call costs
	}
	tests := []struct {
		name   string
		limits budget.Limits
		steps  []step
	}{
		{name: "lease", limits: budget.Limits{PerMinute: 600, Burst: 1000}, steps: []step{
			{0, 1},                                 // first take: one call (the bucket is unknown)
			{0, 1},                                 // second take leases a batch
			{0, 0},                                 // spent from the lease
			{budget.LeaseTTL - time.Nanosecond, 0}, // still within LeaseTTL
			{time.Nanosecond, 1},                   // expired: taken from the store again
			{0, 0},                                 // the new lease
		}},
		{name: "cached wait, budget off", limits: budget.Limits{}, steps: []step{
			{0, 1}, // read
			{0, 0}, // cached
			{budget.WaitCacheTTL - time.Nanosecond, 0}, // still fresh
			{time.Nanosecond, 1},                       // read again
			{0, 0},
		}},
	}
	for engine, st := range stores(t) {
		for _, tt := range tests {
			t.Run(engine+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
				var mu sync.Mutex
				cache := now
				cs := &counting{st: st}
				b, err := budget.New(budget.Config{Store: cs, NowFunc: func() time.Time { return now },
					CacheClockFunc: func() time.Time { mu.Lock(); defer mu.Unlock(); return cache },
					LimitsFunc:     func() budget.Limits { return tt.limits }})
				if err != nil {
					t.Fatal(err)
				}
				account := "robot-" + tt.name
				for i, s := range tt.steps {
					mu.Lock()
					cache = cache.Add(s.advance)
					mu.Unlock()
					before := cs.n.Load()
					if wait, _, err := b.TakeCall(ctx, account, platform.PriorityPerson); err != nil || wait != 0 {
						t.Fatalf("call %d: wait %s, err %v", i+1, wait, err)
					}
					if got := cs.n.Load() - before; got != s.want {
						t.Errorf("call %d (cache clock +%s): %d statements, want %d", i+1, s.advance, got, s.want)
					}
				}
			})
		}
	}
}
