// Package retention deletes old intake rows: stored webhook deliveries and
// callback dedupe rows older than the runtime setting
// retention.intake_max_age (default 30 days), in bounded batches, as a
// River periodic job that runs on the elected leader only. Change events,
// the changes' history, are never deleted.
package retention

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"changebot/store"
)

// Kind is the pruning job's kind (persisted in River's table).
const Kind = "prune_intake"

// Args runs one pruning pass.
type Args struct{}

// Kind implements river.JobArgs.
func (Args) Kind() string { return Kind }

// Store deletes the old rows of one intake table (store.Store).
type Store interface {
	// PruneIntake deletes at most limit rows of table received before
	// before and returns how many it deleted.
	PruneIntake(ctx context.Context, table string, before time.Time, limit int) (int64, error)
}

// MinMaxAge is the least age of a row before it is deleted, whatever
// retention.intake_max_age says: a stored delivery and a callback's dedupe
// row must outlive every window in which the platform may send the same
// delivery again, or a redelivery is processed twice. GitHub keeps
// deliveries for redelivery 3 days (7 on GitHub Enterprise Server;
// docs.github.com "Redelivering webhooks"); GitLab resends from a hook's
// Recent events, kept 7 days. The setting's own minimum (settings) is this.
const MinMaxAge = 8 * 24 * time.Hour

// Defaults of Config's zero fields.
const (
	DefaultInterval   = 10 * time.Minute
	DefaultBatchSize  = 1000
	DefaultMaxBatches = 50
)

// Config configures a Pruner. Store and MaxAgeFunc are required.
type Config struct {
	Store Store
	// MaxAgeFunc returns how old a row must be to be deleted
	// (retention.intake_max_age), read at the start of every pass; a
	// result of 0 or less deletes nothing, one under MinMaxAge counts as
	// MinMaxAge.
	MaxAgeFunc func() time.Duration
	// NowFunc is the clock (time.Now when nil).
	NowFunc func() time.Time
	// Interval between passes.
	Interval time.Duration
	// BatchSize bounds the rows one DELETE removes, so no statement holds
	// locks on a large part of a table.
	BatchSize int
	// MaxBatches bounds the DELETEs of one pass per table; what is left
	// goes at the next pass.
	MaxBatches int
	Logger     *slog.Logger
}

// Pruner deletes old intake rows.
type Pruner struct{ cfg Config }

// New returns a Pruner with cfg's zero fields set to the defaults.
func New(cfg Config) *Pruner {
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.MaxBatches <= 0 {
		cfg.MaxBatches = DefaultMaxBatches
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Pruner{cfg: cfg}
}

// Report is what one pass deleted.
type Report struct {
	// Deleted counts the rows deleted per table.
	Deleted map[string]int64
	// Batches is the number of DELETE statements run.
	Batches int
	// More is true when a table still had rows to delete after
	// MaxBatches batches.
	More bool
}

// Run does one pass: for each intake table, DELETEs of at most BatchSize
// rows received before now - MaxAgeFunc(), until one deletes fewer than
// BatchSize or MaxBatches have run.
func (p *Pruner) Run(ctx context.Context) (Report, error) {
	rep := Report{Deleted: map[string]int64{}}
	maxAge := p.cfg.MaxAgeFunc()
	if maxAge <= 0 {
		return rep, nil
	}
	maxAge = max(maxAge, MinMaxAge) // a value stored before the floor existed
	before := p.cfg.NowFunc().Add(-maxAge)
	var errs []error
	for _, table := range []string{store.TableWebhookDeliveries, store.TableCallbackRequests} {
		for i := 0; ; i++ {
			if i == p.cfg.MaxBatches {
				rep.More = true
				break
			}
			n, err := p.cfg.Store.PruneIntake(ctx, table, before, p.cfg.BatchSize)
			rep.Batches++
			rep.Deleted[table] += n
			if err != nil {
				errs = append(errs, err)
				break
			}
			if n < int64(p.cfg.BatchSize) {
				break
			}
		}
	}
	level := slog.LevelDebug
	if rep.Deleted[store.TableWebhookDeliveries]+rep.Deleted[store.TableCallbackRequests] > 0 {
		level = slog.LevelInfo
	}
	p.cfg.Logger.Log(ctx, level, "old intake rows deleted", "before", before.UTC().Format(time.RFC3339),
		"webhook_deliveries", rep.Deleted[store.TableWebhookDeliveries], "callback_requests", rep.Deleted[store.TableCallbackRequests],
		"batches", rep.Batches, "more", rep.More)
	return rep, errors.Join(errs...)
}

// PeriodicJob returns the River periodic job of the pruner: inserted by
// the elected leader only, one at a time, when it becomes leader and every
// Interval after.
func (p *Pruner) PeriodicJob() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(p.cfg.Interval), func() (river.JobArgs, *river.InsertOpts) {
		return Args{}, &river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
			rivertype.JobStateRunning, rivertype.JobStateScheduled}}}
	}, &river.PeriodicJobOpts{ID: Kind, RunOnStart: true})
}

// AddWorker registers the pruner's worker.
func (p *Pruner) AddWorker(workers *river.Workers) {
	river.AddWorker(workers, &worker{p: p})
}

type worker struct {
	river.WorkerDefaults[Args]
	p *Pruner
}

// Work implements river.Worker: one pass. A panic is the job guard's
// (internal/guard.Jobs): an error of this attempt, counted as
// where="prune_intake" and logged with its stack.
func (w *worker) Work(ctx context.Context, _ *river.Job[Args]) error {
	_, err := w.p.Run(ctx)
	return err
}
