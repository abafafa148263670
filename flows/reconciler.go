package flows

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/settings"
	"changebot/store"
)

// ReconcileArgs runs one reconciler pass.
type ReconcileArgs struct{}

// Kind implements river.JobArgs.
func (ReconcileArgs) Kind() string { return rules.KindReconcile }

// ReconcileStore is what the reconciler and the sweeper read from the store
// (implemented by *postgres.Store): one query each.
type ReconcileStore interface {
	ListReconcileCandidates(ctx context.Context, db store.DBTX, p store.ReconcileParams) ([]store.ReconcileCandidate, error)
	WakeStaleWaits(ctx context.Context, db store.DBTX, p store.WakeParams) (int, error)
	ListStuckOperations(ctx context.Context, db store.DBTX, p store.StuckParams) ([]store.Operation, error)
	ListWatchedMRs(ctx context.Context, db store.DBTX, p store.WatchParams) ([]store.Operation, error)
}

// ReconcileConfig configures the reconciler (DESIGN §3 step 8). Zero fields
// take the defaults in DefaultReconcileConfig.
type ReconcileConfig struct {
	// Interval between passes (reconcile.interval).
	Interval time.Duration
	// MinAge and MaxAge bound how long ago a MERGED change last changed for
	// the reconciler to look at it: the window (now - MaxAge, now - MinAge)
	// (reconcile.min_age, reconcile.max_age). Younger changes are left to
	// the webhook and the deploy poll; older ones to an operator.
	MinAge, MaxAge time.Duration
	// MaxRows bounds the changes one pass looks at.
	MaxRows int
	// MaxAncestryChecks bounds the merge_base calls of one pass.
	MaxAncestryChecks int
	// QuietAfter: a change waiting on a pipeline or a merge that has not
	// changed for this long gets its polling job woken now, since a webhook
	// may have been lost (reconcile.quiet_after).
	QuietAfter time.Duration
	// MaxWakes bounds the jobs woken per pass.
	MaxWakes int
	// MaxWatches bounds the merge requests one pass reads for changes
	// waiting without a poll (see watchSteps); the pass after goes on
	// where this one stopped, so every such change is read once every
	// ceil(waiting/MaxWatches) passes.
	MaxWatches int
	// LiveFunc, when set, is read at the start of every pass: its non-zero
	// MinAge, MaxAge and QuietAfter replace the fields above, so runtime
	// settings apply without a restart (Interval is read at start only).
	LiveFunc func() ReconcileConfig
}

// DefaultReconcileConfig holds the reconciler's defaults; those that are
// runtime settings come from the settings registry.
var DefaultReconcileConfig = ReconcileConfig{
	Interval:   settings.DefaultValue(settings.ReconcileInterval).Duration(),
	MinAge:     settings.DefaultValue(settings.ReconcileMinAge).Duration(),
	MaxAge:     settings.DefaultValue(settings.ReconcileMaxAge).Duration(),
	QuietAfter: settings.DefaultValue(settings.ReconcileQuietAfter).Duration(),
	MaxRows:    500, MaxAncestryChecks: 50, MaxWakes: 100, MaxWatches: 100,
}

// live returns c with the values of c.LiveFunc laid over it.
func (c ReconcileConfig) live() ReconcileConfig {
	if c.LiveFunc == nil {
		return c
	}
	l := c.LiveFunc()
	c.MinAge = cmpOrDur(l.MinAge, c.MinAge)
	c.MaxAge = cmpOrDur(l.MaxAge, c.MaxAge)
	c.QuietAfter = cmpOrDur(l.QuietAfter, c.QuietAfter)
	return c
}

func (c ReconcileConfig) withDefaults() ReconcileConfig {
	d := DefaultReconcileConfig
	c.Interval = cmpOrDur(c.Interval, d.Interval)
	c.MinAge = cmpOrDur(c.MinAge, d.MinAge)
	c.MaxAge = cmpOrDur(c.MaxAge, d.MaxAge)
	c.QuietAfter = cmpOrDur(c.QuietAfter, d.QuietAfter)
	if c.MaxRows <= 0 {
		c.MaxRows = d.MaxRows
	}
	if c.MaxAncestryChecks < 0 {
		c.MaxAncestryChecks = 0
	} else if c.MaxAncestryChecks == 0 {
		c.MaxAncestryChecks = d.MaxAncestryChecks
	}
	if c.MaxWakes <= 0 {
		c.MaxWakes = d.MaxWakes
	}
	if c.MaxWatches <= 0 {
		c.MaxWatches = d.MaxWatches
	}
	return c
}

func cmpOrDur(v, d time.Duration) time.Duration {
	if v <= 0 {
		return d
	}
	return v
}

// Reconciler finds MERGED changes whose deploy confirmation was lost and
// flips them through MarkValidated, and wakes the polls of waits that heard
// nothing for a while. It runs as a River periodic job, which River inserts
// on the elected leader only; the job is unique while queued or running, so
// one pass runs at a time across replicas.
type Reconciler struct {
	e   *Engine
	st  ReconcileStore
	cfg ReconcileConfig

	mu sync.Mutex
	// watchAfter is the keyset cursor of the MR watch: the last operation
	// id the previous pass read ("" to start over). It lives in memory: a
	// new leader starts over, which only reads some MRs sooner.
	watchAfter string
}

// NewReconciler returns a reconciler over e and st.
func NewReconciler(e *Engine, st ReconcileStore, cfg ReconcileConfig) *Reconciler {
	return &Reconciler{e: e, st: st, cfg: cfg.withDefaults()}
}

// ReconcileReport is what one pass did.
type ReconcileReport struct {
	Candidates     int
	Flipped        map[string]int // by rule: exact, contains, watermark
	PipelineLists  int
	AncestryChecks int
	Woken          int
	// Watched counts the merge requests read for changes waiting without
	// a poll; Found those GitLab showed closed or merged.
	Watched, Found int
	Errors         int
}

// Run does one pass (DESIGN §3 step 8, §9): one query for the candidates
// (with the watermark verdict), one pipelines list per (project, target
// branch), at most MaxAncestryChecks merge_base calls, one write
// transaction per flip, and one statement waking quiet waits. The work per
// pass is bounded by MaxRows whatever the number of changes.
func (r *Reconciler) Run(ctx context.Context) (ReconcileReport, error) {
	rep := ReconcileReport{Flipped: map[string]int{}}
	// Its GitLab reads are background work: they yield to work a person
	// waits on when the call budget runs low (issue 12 point 4).
	ctx = platform.WithPriority(ctx, platform.PriorityBackground)
	now := r.e.now().UTC()
	cfg := r.cfg.live()
	cands, err := r.st.ListReconcileCandidates(ctx, r.e.st.DB(), store.ReconcileParams{
		After: now.Add(-cfg.MaxAge), Before: now.Add(-cfg.MinAge), Limit: cfg.MaxRows})
	if err != nil {
		return rep, err
	}
	rep.Candidates = len(cands)
	budget := r.cfg.MaxAncestryChecks
	for start := 0; start < len(cands); {
		end := start + 1
		for end < len(cands) && cands[end].ProjectID == cands[start].ProjectID && cands[end].TargetBranch == cands[start].TargetBranch {
			end++
		}
		r.reconcileBranch(ctx, cands[start:end], &budget, &rep)
		start = end
	}
	// Only a poll due later than QuietAfter from now is woken: a wait on
	// its normal schedule keeps one poll per interval (issue 12 point 4;
	// waking every poll due later than the short interval polled each
	// quiet wait at every pass, twice per long interval).
	rep.Woken, err = r.st.WakeStaleWaits(ctx, r.e.st.DB(), store.WakeParams{
		Steps: stepInts(rules.PollingSteps()), Kinds: rules.PollingKinds(),
		QuietBefore: now.Add(-cfg.QuietAfter), WakeAfter: now.Add(cfg.QuietAfter), Limit: r.cfg.MaxWakes})
	if err != nil {
		return rep, err
	}
	if err := r.watchMRs(ctx, &rep); err != nil {
		return rep, err
	}
	level := slog.LevelInfo
	if len(rep.Flipped) == 0 && rep.Woken == 0 && rep.Found == 0 && rep.Errors == 0 {
		level = slog.LevelDebug // a pass that changed nothing, every minute, is noise
	}
	r.e.log.Log(ctx, level, "reconciler pass", "candidates", rep.Candidates, "flipped", rep.Flipped, "pipeline_lists", rep.PipelineLists,
		"ancestry_checks", rep.AncestryChecks, "woken", rep.Woken, "watched", rep.Watched, "found", rep.Found, "errors", rep.Errors)
	return rep, nil
}

// watchSteps are the steps in which a change with a merge request waits
// without a job that reads the MR on a schedule: the approval wait of the
// MR-first order, the pending and the failed steps, and the steps whose
// job is short (it reads the MR when it runs). A person may close or merge
// the MR there; the close or merge hook tells at once, and when it is lost
// the reconciler's MR watch does within one pass (issue 10 points 1, 2).
// The polling steps (Step.Polls) find it on their own poll.
var watchSteps = rules.StepsWhere(func(s rules.Step) bool { return s.Cancellable() && !s.Polls() })

// watchStatuses are the binding statuses of watchSteps.
var watchStatuses = func() []string {
	var out []string
	for _, c := range watchSteps {
		if st := rules.MustStep(c).Status; !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	return out
}()

// watchMRs reads the merge request of up to MaxWatches changes waiting at
// a watchStep (one query, one MR read each, continuing from where the last
// pass stopped) and settles what a lost hook would have told: merged
// finishes the change as merged, closed by a person ends it in MR_CLOSED.
// A rate-limited read ends the watch of this pass (the next one goes on);
// other errors are counted and logged.
func (r *Reconciler) watchMRs(ctx context.Context, rep *ReconcileReport) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops, err := r.st.ListWatchedMRs(ctx, r.e.st.DB(), store.WatchParams{Steps: stepInts(watchSteps), Statuses: watchStatuses,
		After: r.watchAfter, Limit: r.cfg.MaxWatches})
	if err != nil {
		return err
	}
	prev := r.watchAfter
	if len(ops) < r.cfg.MaxWatches {
		r.watchAfter = "" // the end: the next pass starts over
	} else {
		r.watchAfter = ops[len(ops)-1].ID
	}
	source := SourceReconciler + ":mr_watch"
	for i, op := range ops {
		mr, err := r.e.gl.MergeRequest(ctx, op.ProjectID, op.MRIID, false)
		if errors.Is(err, platform.ErrRateLimited) {
			rep.Errors++
			r.watchAfter = prev // this one first, next pass
			if i > 0 {
				r.watchAfter = ops[i-1].ID
			}
			return nil
		}
		if err != nil {
			rep.Errors++
			r.e.opLog(op).Warn("reconciler could not read the merge request", "err", err)
			continue
		}
		rep.Watched++
		switch mr.State {
		case platform.MRStateMerged:
			err = r.e.finishMerged(ctx, op, mr, source)
		case platform.MRStateClosed:
			err = r.e.closedByPerson(ctx, op, mr.ClosedBy.Username, source)
		default:
			continue
		}
		rep.Found++
		if err != nil && !isConflict(err) {
			rep.Errors++
			r.e.opLog(op).Warn("reconciler could not record what a person did to the merge request", "state", mr.State, "err", err)
		}
	}
	return nil
}

// reconcileBranch handles the candidates of one (project, target branch):
// exact check first, the watermark rule as the fallback.
func (r *Reconciler) reconcileBranch(ctx context.Context, cands []store.ReconcileCandidate, budget *int, rep *ReconcileReport) {
	first := cands[0].Operation
	rep.PipelineLists++
	pipes, err := r.e.gl.Pipelines(ctx, first.ProjectID, first.TargetBranch, "")
	if err != nil {
		rep.Errors++
		r.e.opLog(first).Warn("reconciler could not list target branch pipelines", "err", err)
		pipes = nil
	}
	for _, c := range cands {
		p, rule, err := r.exact(ctx, c.Operation, pipes, budget, rep)
		if err != nil {
			rep.Errors++
			r.e.opLog(c.Operation).Warn("reconciler could not check ancestry", "err", err)
		}
		payload := map[string]any{}
		switch {
		case rule != "":
			payload = map[string]any{"pipeline_id": p.ID, "sha": p.SHA}
		case c.Watermarked:
			rule = ruleWatermark
		default:
			continue
		}
		payload["rule"] = rule
		flipped, err := r.e.MarkValidated(ctx, c.ID, SourceReconciler+":"+rule, ActorReconciler, payload)
		if err != nil {
			rep.Errors++
			r.e.opLog(c.Operation).Warn("reconciler could not mark validated", "err", err)
			continue
		}
		if flipped {
			rep.Flipped[rule]++
		}
	}
}

// exact applies the exact rule within the pass's ancestry budget.
func (r *Reconciler) exact(ctx context.Context, op store.Operation, pipes []platform.Pipeline, budget *int, rep *ReconcileReport) (platform.Pipeline, string, error) {
	for _, p := range pipes {
		if p.SHA == op.MergeCommitSHA && p.Status == platform.PipelineSuccess {
			return p, ruleExact, nil
		}
	}
	if *budget <= 0 {
		return platform.Pipeline{}, "", nil
	}
	hasSuccess := false
	for _, p := range pipes {
		hasSuccess = hasSuccess || p.Status == platform.PipelineSuccess
	}
	if !hasSuccess {
		return platform.Pipeline{}, "", nil
	}
	*budget--
	rep.AncestryChecks++
	return r.e.deployEvidence(ctx, op, pipes, false)
}

// PeriodicJob returns the River periodic job of the reconciler; River's
// leader inserts it every Interval.
func (r *Reconciler) PeriodicJob() *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(r.cfg.Interval), func() (river.JobArgs, *river.InsertOpts) {
		return ReconcileArgs{}, &river.InsertOpts{UniqueOpts: *uniqueActive, MaxAttempts: 1}
	}, &river.PeriodicJobOpts{ID: rules.KindReconcile})
}

// AddWorker registers the reconciler's worker.
func (r *Reconciler) AddWorker(workers *river.Workers) {
	river.AddWorker(workers, &periodicWorker[ReconcileArgs]{run: func(ctx context.Context) error {
		_, err := r.Run(ctx)
		return err
	}})
}

// periodicWorker runs a periodic pass; its panic is the job guard's
// (internal/guard.Jobs, STYLE 13). A failed pass is not retried: the next
// one redoes it.
type periodicWorker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	run func(ctx context.Context) error
}

// Work implements river.Worker.
func (w *periodicWorker[T]) Work(ctx context.Context, _ *river.Job[T]) error { return w.run(ctx) }

func stepInts(steps []rules.StepCode) []int {
	out := make([]int, len(steps))
	for i, s := range steps {
		out[i] = int(s)
	}
	return out
}
