package budget_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"changebot/budget"
	"changebot/database"
	"changebot/platform"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// skew is how far the ahead replica's local clock runs ahead of the other's.
const skew = 5 * time.Minute

// replicas are two Budgets over one PostgreSQL schema whose local clocks
// differ by skew; with dbClock each measures the database's clock
// (budget.Clock over database.DB.Now) and runs on it, else on its local
// clock, as before issue 21 point 6.
type replicas struct {
	ahead, behind *budget.Budget
	// aheadNow and behindNow are the clocks each Budget runs on.
	aheadNow, behindNow func() time.Time
}

func newReplicas(t *testing.T, dbClock bool, l budget.Limits) replicas {
	t.Helper()
	ctx := context.Background()
	sc := pgtest.New(t)
	db, err := database.Open(ctx, sc.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	one := func(local func() time.Time) (*budget.Budget, func() time.Time) {
		st, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
		if err != nil {
			t.Fatal(err)
		}
		now := local
		if dbClock {
			c, err := budget.NewClock(budget.ClockConfig{ReadFunc: db.Now, LocalFunc: local})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			now = c.Now
		}
		b, err := budget.New(budget.Config{Store: st, NowFunc: now, LimitsFunc: func() budget.Limits { return l }})
		if err != nil {
			t.Fatal(err)
		}
		return b, now
	}
	var r replicas
	r.ahead, r.aheadNow = one(func() time.Time { return time.Now().Add(skew) })
	r.behind, r.behindNow = one(time.Now)
	return r
}

// TestSharedBudgetOnTheDatabaseClock: two replicas draw person calls from
// one account's budget (1,200 a minute, a burst of 2) for 2 seconds, each
// asking again 10 to 50 ms after a refusal, one replica's local clock 5
// minutes ahead. On the database's clock each gets at least a quarter of
// the calls granted (runs: 22/17, 24/16, 25/16), and together no more than
// the bucket gave out (the burst plus 20 a second, plus one for the
// boundaries). On their local clocks (the rule before issue 21 point 6) the
// ahead replica refills the shared bucket up to its own future, where the
// other's refill never reaches: the other gets less than a quarter (runs:
// 32/3, 37/3, 34/5), its share of the first burst and a leftover or two.
func TestSharedBudgetOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	const (
		draw  = 2 * time.Second
		limit = 1200
		burst = 2
	)
	for _, tc := range []struct {
		name    string
		dbClock bool
	}{
		{name: "database clock: a fair share each", dbClock: true},
		{name: "local clocks: the ahead replica starves the other", dbClock: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newReplicas(t, tc.dbClock, budget.Limits{PerMinute: limit, Burst: burst})
			ctx := context.Background()
			var wg sync.WaitGroup
			counts := make([]int, 2)
			start := time.Now()
			for i, b := range []*budget.Budget{r.ahead, r.behind} {
				wg.Go(func() {
					for time.Since(start) < draw {
						wait, _, err := b.TakeCall(ctx, "robot", platform.PriorityPerson)
						if err != nil {
							t.Error(err)
							return
						}
						if wait == 0 {
							counts[i]++
							continue
						}
						// A random pause (10 to 50 ms, shorter than the
						// wait): neither replica is always the first to
						// ask after a call flowed back.
						time.Sleep(time.Duration(10+rand.N(40)) * time.Millisecond)
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			ahead, behind := counts[0], counts[1]
			total := ahead + behind
			most := burst + int(elapsed.Seconds()*limit/60) + 1
			t.Logf("in %s: ahead replica %d calls, the other %d (the bucket gave out at most %d)", elapsed.Round(time.Millisecond), ahead, behind, most)
			if total > most {
				t.Errorf("%d calls granted in %s; the bucket holds at most %d", total, elapsed, most)
			}
			fair := 4*ahead >= total && 4*behind >= total
			if fair != tc.dbClock {
				t.Errorf("ahead replica %d calls, the other %d: each got at least a quarter of %d: %t, want %t", ahead, behind, total, fair, tc.dbClock)
			}
		})
	}
}

// TestAccountWaitOnTheDatabaseClock: a 429's wait of 30 s recorded by one
// replica (its Retry-After turned into a moment on the replica's clock, as
// the adapters do) holds the other replica's calls for those 30 s of real
// time, whichever of the two is ahead. On local clocks the replica behind
// would wait 5 min 30 s for the ahead one's 429, and the ahead one would not
// wait at all for the other's.
func TestAccountWaitOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	const retryAfter = 30 * time.Second
	for _, tc := range []struct {
		dbClock      bool
		aheadRecords bool
		want         time.Duration // the other replica's wait
	}{
		{dbClock: true, aheadRecords: true, want: retryAfter},
		{dbClock: true, aheadRecords: false, want: retryAfter},
		{dbClock: false, aheadRecords: true, want: retryAfter + skew},
		{dbClock: false, aheadRecords: false, want: 0},
	} {
		name := fmt.Sprintf("database clock %t, ahead replica records %t", tc.dbClock, tc.aheadRecords)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newReplicas(t, tc.dbClock, budget.Limits{PerMinute: 600, Burst: 10})
			rec, recNow, other, otherNow := r.behind, r.behindNow, r.ahead, r.aheadNow
			if tc.aheadRecords {
				rec, recNow, other, otherNow = r.ahead, r.aheadNow, r.behind, r.behindNow
			}
			ctx := context.Background()
			if err := rec.BlockAccountUntil(ctx, "robot", recNow().Add(retryAfter)); err != nil {
				t.Fatal(err)
			}
			// The other replica's take refuses with the rest of the wait.
			wait, _, err := other.TakeCall(ctx, "robot", platform.PriorityPerson)
			if err != nil {
				t.Fatal(err)
			}
			// And its adapter's check (platform.WaitUntil on its clock).
			until, err := platform.WaitUntil(ctx, other, "robot", otherNow)
			if err != nil {
				t.Fatal(err)
			}
			held := time.Duration(0)
			if !until.IsZero() {
				held = until.Sub(otherNow())
			}
			const slack = time.Second
			for what, got := range map[string]time.Duration{"budget take": wait, "account wait": held} {
				if got > tc.want || got < tc.want-slack {
					t.Errorf("the other replica's %s: %s, want %s (less at most %s)", what, got, tc.want, slack)
				}
			}
		})
	}
}

// TestClockSync: Sync takes the database's time of its read with the
// shortest round trip as the middle of that trip, and Now adds the local
// time elapsed since. Here each read reaches the database three quarters
// into its round trip (the way there is slow), so a read of round trip d
// puts the clock d/4 ahead: the first read (40 ms, a new connection) would
// be 10 ms off, the shortest (2 ms) is 0.5 ms off.
func TestClockSync(t *testing.T) {
	t.Parallel()
	local := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const ahead = time.Hour // the database's clock is an hour ahead of the local one
	trips := []time.Duration{40 * time.Millisecond, 2 * time.Millisecond, 10 * time.Millisecond}
	reads := 0
	c, err := budget.NewClock(budget.ClockConfig{LocalFunc: func() time.Time { return local },
		ReadFunc: func(context.Context) (time.Time, error) {
			d := trips[reads%len(trips)]
			reads++
			local = local.Add(d * 3 / 4)
			at := local.Add(ahead)
			local = local.Add(d / 4)
			return at, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Now(); !got.Equal(local) {
		t.Fatalf("Now before any read = %s, want the local clock %s", got, local)
	}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if reads != budget.ClockSamples {
		t.Errorf("Sync read the database %d times, want %d", reads, budget.ClockSamples)
	}
	if got, want := c.Offset(), ahead+500*time.Microsecond; got != want {
		t.Errorf("offset %s, want %s (the 2 ms read's error of 0.5 ms)", got, want)
	}
	local = local.Add(time.Minute)
	if got, want := c.Now(), local.Add(ahead+500*time.Microsecond); !got.Equal(want) {
		t.Errorf("Now a minute later = %s, want %s", got, want)
	}
	if _, err := budget.NewClock(budget.ClockConfig{}); err == nil {
		t.Error("NewClock without ReadFunc: no error")
	}
}
