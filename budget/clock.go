package budget

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// ClockSyncInterval is how often Clock.Run reads the database's clock
// again: the offset a replica measured drifts by its oscillator's error
// (tens of microseconds a minute) and jumps when NTP steps its clock.
const ClockSyncInterval = time.Minute

// ClockConfig wires a Clock.
type ClockConfig struct {
	// ReadFunc reads the database's now (database.DB.Now: one
	// `SELECT clock_timestamp()` on PostgreSQL, the local clock on SQLite).
	// Required.
	ReadFunc func(ctx context.Context) (time.Time, error)
	// LocalFunc is this replica's clock; nil means time.Now. Tests inject
	// one that runs ahead.
	LocalFunc func() time.Time
	// Logger receives a warning when a read fails; nil discards.
	Logger *slog.Logger
}

// Clock is the database's clock as one replica sees it: the database's
// time at the last read plus the local time elapsed since (on Go's
// monotonic clock when LocalFunc is time.Now, so a local clock stepped
// between reads moves nothing). The call budget's bucket, its leases and
// the account waits are shared by every replica through the database, so
// they must be measured on one clock: with each replica's own, a replica
// 5 minutes ahead refilled the shared bucket up to its future and the
// other got 9 calls in 5 minutes instead of about 500 (issue 21 point 6).
// The read's own round trip bounds the error: the database's time is
// taken as the middle of the round trip. Before the first successful read
// Now is the local clock. Safe for concurrent use.
type Clock struct {
	read  func(ctx context.Context) (time.Time, error)
	local func() time.Time
	log   *slog.Logger
	base  atomic.Pointer[clockBase]
}

// clockBase pairs the database's time of one read with the local time at
// the middle of its round trip.
type clockBase struct {
	db    time.Time
	local time.Time
}

// NewClock returns the clock of cfg; call Sync (at start) and Run.
func NewClock(cfg ClockConfig) (*Clock, error) {
	if cfg.ReadFunc == nil {
		return nil, fmt.Errorf("configuring the database clock: ReadFunc is required")
	}
	c := &Clock{read: cfg.ReadFunc, local: cfg.LocalFunc, log: cfg.Logger}
	if c.local == nil {
		c.local = time.Now
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Now returns the database's time now, in UTC (budget.Config.NowFunc and
// the adapters' account waits).
func (c *Clock) Now() time.Time {
	b := c.base.Load()
	if b == nil {
		return c.local().UTC()
	}
	return b.db.Add(c.local().Sub(b.local)).UTC()
}

// Offset is how far the database's clock is ahead of the local one at the
// last read (negative: behind); zero before the first.
func (c *Clock) Offset() time.Duration {
	b := c.base.Load()
	if b == nil {
		return 0
	}
	return b.db.Sub(b.local)
}

// ClockSamples is how many reads one Sync makes; it keeps the one of the
// shortest round trip. The first read on a pool may open a connection
// (tens of milliseconds, unevenly split between the ways): taken as the
// middle, it put one replica's clock tens of milliseconds ahead of the
// other's, and since the bucket never refills back (store
// BudgetTakeParams.Now) the replica behind lost that much refill after
// each take of the other, most of the bucket at 20 calls a second.
const ClockSamples = 3

// Sync reads the database's clock ClockSamples times and sets the offset
// from the read of the shortest round trip. On an error the last offset
// stays; the error is the read's, wrapped.
func (c *Clock) Sync(ctx context.Context) error {
	var best *clockBase
	var bestRTT time.Duration
	for range ClockSamples {
		before := c.local()
		db, err := c.read(ctx)
		if err != nil {
			return fmt.Errorf("measuring this replica's offset from the database's clock: %w", err)
		}
		after := c.local()
		if rtt := after.Sub(before); best == nil || rtt < bestRTT {
			best, bestRTT = &clockBase{db: db, local: before.Add(rtt / 2)}, rtt
		}
	}
	c.base.Store(best)
	return nil
}

// Run calls Sync every interval (ClockSyncInterval when not positive)
// until ctx ends; a failed read is logged and keeps the last offset.
func (c *Clock) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = ClockSyncInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.log.WarnContext(ctx, "reading the database's clock failed; keeping the last offset", "err", err)
		}
	}
}
