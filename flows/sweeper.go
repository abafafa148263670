package flows

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"changebot/flows/rules"
	"changebot/settings"
	"changebot/store"
)

// SweepArgs runs one sweeper pass.
type SweepArgs struct{}

// Kind implements river.JobArgs.
func (SweepArgs) Kind() string { return rules.KindSweep }

// SweepConfig configures the stuck-step sweeper (DESIGN §2 "a sweeper finds
// operations whose step is in progress but that have no live job"). Zero
// fields take the defaults in DefaultSweepConfig.
type SweepConfig struct {
	// Interval between passes (sweeper.interval).
	Interval time.Duration
	// After is how long an in-progress operation must have been unchanged,
	// with no live job, before the sweeper acts (sweeper.after). Keep it
	// well above jobs.rescue_after, so River's own rescue goes first.
	After time.Duration
	// MaxRows bounds the operations of one pass.
	MaxRows int
	// AfterFunc, when set, is read at the start of every pass; a positive
	// result replaces After, so the runtime setting applies without a
	// restart (Interval is read at start only).
	AfterFunc func() time.Duration
}

// DefaultSweepConfig holds the sweeper's defaults; those that are runtime
// settings come from the settings registry.
var DefaultSweepConfig = SweepConfig{
	Interval: settings.DefaultValue(settings.SweeperInterval).Duration(),
	After:    settings.DefaultValue(settings.SweeperAfter).Duration(),
	MaxRows:  100,
}

// Sweeper re-enqueues the job of operations stuck in an in-progress step
// with no live job (the job was discarded, cancelled or lost). It runs as a
// River periodic job on the elected leader.
type Sweeper struct {
	e     *Engine
	st    ReconcileStore
	cfg   SweepConfig
	steps []rules.StepCode
}

// NewSweeper returns a sweeper over e and st.
func NewSweeper(e *Engine, st ReconcileStore, cfg SweepConfig) *Sweeper {
	d := DefaultSweepConfig
	cfg.Interval = cmpOrDur(cfg.Interval, d.Interval)
	cfg.After = cmpOrDur(cfg.After, d.After)
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = d.MaxRows
	}
	return &Sweeper{e: e, st: st, cfg: cfg, steps: rules.SweepableSteps()}
}

// SweepReport is what one pass did.
type SweepReport struct {
	Stuck      int
	Requeued   int
	Superseded int // changed after the sweeper read it: left alone
}

// Run does one pass: one query for stuck operations (bounded by MaxRows),
// then per operation one compare-and-set write that re-enqueues its step's
// job (steps are idempotent) and records an event by actor "sweeper". The
// write checks step and version under the row lock, so it never writes over
// a state that changed after the pass read it.
func (s *Sweeper) Run(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	after := s.cfg.After
	if s.cfg.AfterFunc != nil {
		after = cmpOrDur(s.cfg.AfterFunc(), after)
	}
	ops, err := s.st.ListStuckOperations(ctx, s.e.st.DB(), store.StuckParams{Steps: stepInts(s.steps), Kinds: rules.StepJobKinds(),
		QuietBefore: s.e.now().UTC().Add(-after), Limit: s.cfg.MaxRows})
	if err != nil {
		return rep, err
	}
	rep.Stuck = len(ops)
	var errs []error
	for _, op := range ops {
		err := s.requeue(ctx, op)
		switch {
		case err == nil:
			rep.Requeued++
		case isConflict(err):
			rep.Superseded++
		default:
			errs = append(errs, err)
		}
	}
	if rep.Stuck > 0 {
		s.e.log.Warn("sweeper pass", "stuck", rep.Stuck, "requeued", rep.Requeued, "superseded", rep.Superseded)
	}
	return rep, errors.Join(errs...)
}

// requeue is the sweeper's compare-and-set: a same-step bookkeeping write
// (no move, so not a row of the transition table) that bumps the version,
// appends the event and enqueues the step's job, only if op is still at the
// step and version the sweeper read.
func (s *Sweeper) requeue(ctx context.Context, op store.Operation) error {
	step := rules.StepCode(op.Step)
	_, _, err := s.e.st.ApplyTransition(ctx, store.TransitionParams{
		OperationID: op.ID, ExpectStep: op.Step, ExpectVersion: op.Version, ToStep: op.Step, ToStatus: op.Status,
		KeepStepClock: true,
		Event: store.EventParams{Type: store.EventTransition, Actor: ActorSweeper, Source: "sweeper",
			Payload: map[string]any{"resumed_step": step.String(), "reason": "no live job since " + op.UpdatedAt.Format(time.RFC3339)}},
		Jobs: s.e.followUps(op, step, op.Version+1, 0),
	})
	if err == nil {
		s.e.opLog(op).Warn("sweeper re-enqueued a stuck step", attrStep, step.String())
	}
	return err
}

// PeriodicJob returns the River periodic job of the sweeper.
func (s *Sweeper) PeriodicJob() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(s.cfg.Interval), func() (river.JobArgs, *river.InsertOpts) {
		return SweepArgs{}, &river.InsertOpts{UniqueOpts: *uniqueActive, MaxAttempts: 1}
	}, &river.PeriodicJobOpts{ID: rules.KindSweep})
}

// AddWorker registers the sweeper's worker.
func (s *Sweeper) AddWorker(workers *river.Workers) {
	river.AddWorker(workers, &periodicWorker[SweepArgs]{run: func(ctx context.Context) error {
		_, err := s.Run(ctx)
		return err
	}})
}
