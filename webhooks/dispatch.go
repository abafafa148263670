package webhooks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"changebot/store"
)

// DefaultDispatchInterval is how often a Dispatcher looks for stored
// deliveries without their jobs when nothing wakes it: the deliveries a
// replica stored and died before dispatching wait at most this long on
// another replica (or on the next start).
const DefaultDispatchInterval = time.Second

// DefaultDispatchBatch is the most deliveries one dispatch transaction
// enqueues when DispatcherConfig.MaxBatch is zero.
const DefaultDispatchBatch = 256

// DispatchStore enqueues the jobs of stored deliveries that have none yet
// (store.Store implements it): at most max, oldest first, marked
// dispatched in the same transaction, never one delivery twice however
// many replicas dispatch at once. n is how many it enqueued.
type DispatchStore interface {
	DispatchDeliveries(ctx context.Context, max int, job func(id int64) river.InsertManyParams) (n int, err error)
}

// deliveryOutbox stores deliveries without their jobs (store.Store's
// StoreDeliveries: one autocommit statement on PostgreSQL), for the
// Dispatcher to enqueue.
type deliveryOutbox interface {
	StoreDeliveries(ctx context.Context, ds []store.Delivery) (out []store.DeliveryInsert, err error)
}

// DispatcherConfig configures NewDispatcher.
type DispatcherConfig struct {
	// Store dispatches. Required.
	Store DispatchStore
	// Interval is the time between passes when nothing wakes the
	// dispatcher; zero means DefaultDispatchInterval.
	Interval time.Duration
	// MaxBatch bounds one dispatch transaction; zero means
	// DefaultDispatchBatch.
	MaxBatch int
	// Logger receives dispatch failures; nil discards.
	Logger *slog.Logger
}

// Dispatcher turns stored deliveries without their jobs into
// ProcessDeliveryJob jobs through River's API (issue 12): the intake
// stores a batch with one durable statement and wakes it (Wake), so a
// delivery's job follows one dispatch transaction later, off the request
// path; it also passes every Interval, for deliveries a replica stored but
// did not dispatch (it died in between).
type Dispatcher struct {
	cfg  DispatcherConfig
	wake chan struct{}
}

// NewDispatcher returns a Dispatcher; it errors without a store or with a
// negative interval or batch.
func NewDispatcher(cfg DispatcherConfig) (*Dispatcher, error) {
	var problems []error
	if cfg.Store == nil {
		problems = append(problems, errors.New("a dispatch store is required"))
	}
	if cfg.Interval < 0 {
		problems = append(problems, fmt.Errorf("dispatch interval %s is negative", cfg.Interval))
	}
	if cfg.MaxBatch < 0 {
		problems = append(problems, fmt.Errorf("dispatch batch %d is negative", cfg.MaxBatch))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the delivery dispatcher: %w", errors.Join(problems...))
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultDispatchInterval)
	cfg.MaxBatch = cmp.Or(cfg.MaxBatch, DefaultDispatchBatch)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{cfg: cfg, wake: make(chan struct{}, 1)}, nil
}

// Wake asks for a pass now (the intake calls it after its insert
// committed). It never blocks: wakes arriving during a pass make one more
// pass.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run passes when woken and every Interval until ctx ends, then returns.
// A failed pass is logged (once until a pass succeeds again: a database not
// migrated yet fails every pass) and retried at the next.
func (d *Dispatcher) Run(ctx context.Context) {
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-t.C:
		}
		_, err := d.Pass(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			d.cfg.Logger.Warn("dispatching stored webhook deliveries", attrError, err)
			failing = true
		case err == nil && failing:
			d.cfg.Logger.Info("dispatching stored webhook deliveries again")
			failing = false
		}
	}
}

// Pass enqueues the jobs of every stored delivery without one, batch by
// batch, until a batch comes back short (none left, or other replicas'
// dispatchers hold the rest). It returns how many it enqueued.
func (d *Dispatcher) Pass(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := d.cfg.Store.DispatchDeliveries(ctx, d.cfg.MaxBatch, ProcessDeliveryJob)
		total += n
		if err != nil {
			return total, err
		}
		if n < d.cfg.MaxBatch {
			return total, nil
		}
	}
}
