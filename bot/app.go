// Package bot wires changebot together and does nothing else: it applies
// the configuration, opens the database and the platform adapter (GitLab
// or GitHub), builds the flow engine and its River workers, mounts the
// HTTP routes (webhooks, callbacks, the REST API and pages of package api,
// health and metrics), and starts and shuts down (Serve; StartDemo for
// the demo's in-process bot). It holds no business rules, no HTTP handler
// of its own beyond health and metrics, and no command line (package cli);
// nothing imports it but cmd/changebot (and the chaos harness's
// replicas).
package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"changebot/api"
	"changebot/budget"
	"changebot/commands"
	"changebot/config"
	"changebot/database"
	"changebot/demo"
	"changebot/flows"
	"changebot/flows/rules"
	"changebot/internal/guard"
	"changebot/notify"
	"changebot/platform/approval"
	"changebot/retention"
	"changebot/routing"
	"changebot/settings"
	"changebot/store"
	"changebot/templates"
	"changebot/webhooks"
)

// AppOpts are optional settings of NewApp; nil means defaults.
type AppOpts struct {
	Logger *slog.Logger
	// Schema is the PostgreSQL schema holding every table (tests, demo);
	// empty means the connection's search_path.
	Schema string
	// Poll overrides the polling schedule (demo and tests use short ones).
	Poll flows.PollConfig
	// Registry receives the metrics; nil means a new registry.
	Registry *prometheus.Registry
	// ClientID names this replica in River; empty lets River choose.
	ClientID string
	// StepHookFunc is passed to flows.EngineConfig.StepHookFunc (tests
	// inject panics into steps with it); nil in production.
	StepHookFunc func(kind string)
	// PGTracer, when set (benchmarks), traces every query of the
	// PostgreSQL pool.
	PGTracer pgx.QueryTracer
	// Now is the clock of the list API's stuck=true (tests move it past a
	// deadline); nil means time.Now.
	Now func() time.Time
	// AdoptBindings derives an adopted merge request's binding
	// (flows.AdoptConfig.Bindings); nil means the repository's path rules
	// (the engine's own, over the platform adapter).
	AdoptBindings flows.BindingDeriver
}

// App is one running replica: HTTP intake plus job workers.
type App struct {
	cfg    config.Config
	log    *slog.Logger
	db     *database.DB
	store  store.Store
	engine *flows.Engine
	jobs   database.JobClient
	// gitlab is the platform's adapter (config.Config.Platform): GitLab's or
	// GitHub's.
	gitlab   platformClient
	registry *prometheus.Registry
	router   http.Handler
	// intake is the webhook handler's group commit; Run closes it after
	// the HTTP server stopped. Nil for a handler without one.
	intake intakeCloser
	// dispatcher enqueues the jobs of stored deliveries (issue 12): woken
	// by the intake on PostgreSQL, and every second on both engines for
	// deliveries a replica stored but did not dispatch.
	dispatcher *webhooks.Dispatcher
	schema     string
	settings   *settings.Cache
	gauge      *flows.ActiveGauge
	// clock is the database's clock as this replica measures it: the call
	// budget and the account waits run on it (issue 21 point 6).
	clock *budget.Clock
	// calls is the GitLab call budget (nil on GitHub), whose calls left
	// the overview page shows.
	calls *budget.Budget
	// now is the list API's clock (AppOpts.Now).
	now func() time.Time
	// draining is set once Run got its stop signal: /readyz answers 503.
	draining atomic.Bool
	// refusals counts the approval callbacks refused for a bad signature,
	// for the hint of changes waiting in APPROVAL_SENT.
	refusals *api.CallbackRefusals
}

// NewApp opens the database cfg.DatabaseURL names and builds every
// subsystem; it starts nothing (see Run). On a SQLite file it first takes
// the file's lock (a second process gets an error saying several replicas
// need PostgreSQL) and applies the migrations; on PostgreSQL it applies them
// only with cfg.AutoMigrate.
func NewApp(ctx context.Context, cfg config.Config, opts *AppOpts) (*App, error) {
	if opts == nil {
		opts = &AppOpts{}
	}
	a := &App{cfg: cfg, log: opts.Logger, registry: opts.Registry, schema: opts.Schema, now: opts.Now}
	if a.now == nil {
		a.now = time.Now
	}
	a.refusals = api.NewCallbackRefusals(a.now)
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.registry == nil {
		a.registry = prometheus.NewRegistry()
		a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	registerBuildInfo(a.registry, BuildVersion())
	var err error
	// One process per SQLite file: a second one refuses to start.
	a.db, err = database.Open(ctx, cfg.ResolvedDatabaseURL(), &database.OpenOpts{Schema: opts.Schema, Exclusive: true, Tracer: opts.PGTracer})
	if err != nil {
		return nil, err
	}
	// A SQLite file belongs to this process alone (the lock above): its
	// migrations run at every start, so that serve needs no setup.
	if cfg.AutoMigrate || a.db.Engine() == config.EngineSQLite {
		if err := a.db.Migrate(ctx); err != nil {
			a.db.Close()
			return nil, err
		}
	}
	if err := a.build(ctx, opts); err != nil {
		a.db.Close()
		return nil, err
	}
	return a, nil
}

func (a *App) build(ctx context.Context, opts *AppOpts) error {
	var err error
	a.store, err = a.db.Store(a.log)
	if err != nil {
		return err
	}
	if err := a.buildSettings(ctx, opts.Poll); err != nil {
		return err
	}
	poll := pollFromSettings(a.settings, "")
	rescueAfter := a.settings.Get(settings.JobsRescueAfter, "").Duration() // read at start only
	if a.clock, err = budget.NewClock(budget.ClockConfig{ReadFunc: a.db.Now, Logger: a.log}); err != nil {
		return err
	}
	if err := a.clock.Sync(ctx); err != nil {
		// Serve starts without the database, as the settings cache does:
		// the local clock until Run's next read.
		a.log.Warn("reading the database's clock at start failed; the local clock until the next read", "err", err)
	}
	gm := newGitLabMetrics(a.registry)
	a.gitlab, err = a.newPlatformClient(gm.observe)
	if err != nil {
		return err
	}
	renderer, err := templates.NewRenderer(nil)
	if err != nil {
		return err
	}
	fm := flows.NewMetrics(a.registry)
	notifications, err := notify.NewRouter(a.cfg.Notifications)
	if err != nil {
		return err
	}
	bindings := opts.AdoptBindings
	a.engine, err = flows.NewEngine(flows.EngineConfig{
		Store: a.store, Adapter: a.gitlab, Platform: a.cfg.Platform, Renderer: renderer, Metrics: fm, Logger: a.log,
		Approvals:   approval.New(a.cfg.ApprovalURL, nil),
		ExternalURL: a.cfg.ExternalURL, Poll: poll,
		JobTimeout:         jobTimeout(rescueAfter),
		ApprovalPolicyFunc: approvalPolicyFunc(a.settingText, a.cfg.Platform),
		PollFunc:           func(project string) flows.PollConfig { return pollFromSettings(a.settings, project) },
		QueueFunc:          func(project string) flows.QueueConfig { return queueFromSettings(a.settings, project) },
		AllowOverrideFunc: func(project string) []string {
			return settings.SplitList(a.settingText(settings.PolicyAllowOverride, project))
		},
		StepHookFunc: opts.StepHookFunc,
		// The file's routes come from the engine being built: the func
		// runs only once it is.
		EventJobsFunc: func(op store.Operation, e store.Event) []river.InsertManyParams {
			return notifications.JobsRouted(op, e, a.engine.FileRoutes(op))
		},
		RolloutNotice: notifications.RolloutNotice(),
		Adopt:         flows.AdoptConfig{Projects: a.cfg.AdoptProjects, Label: a.cfg.AdoptLabel, Bindings: bindings},
	})
	if err != nil {
		return err
	}
	executor := commands.NewExecutor(commands.ExecutorConfig{
		Flow: routing.NewCommandFlow(a.engine, a.store), Notes: routing.NewNoteStore(a.store).On(a.cfg.Platform), Access: a.gitlab,
		Adopter:  routing.NewAdopter(a.engine),
		Renderer: renderer, Platform: a.cfg.Platform, Operators: a.cfg.Operators, BotUsers: a.cfg.BotUsers, Logger: a.log,
		RateLimitFunc: func() int { return a.settings.Get(settings.CommandsRateLimit, "").Int() },
	})
	router, err := routing.NewRouter(routing.RouterConfig{Store: a.store, Decode: hookDecoder(a.cfg.Platform),
		Flow: a.engine, Notes: executor, Logger: a.log})
	if err != nil {
		return err
	}
	workers := river.NewWorkers()
	a.engine.AddWorkers(workers)
	router.AddWorker(workers)
	recCfg, sweepCfg := a.periodicConfig()
	reconciler := flows.NewReconciler(a.engine, a.store, recCfg)
	reconciler.AddWorker(workers)
	sweeper := flows.NewSweeper(a.engine, a.store, sweepCfg)
	sweeper.AddWorker(workers)
	pruner := retention.New(retention.Config{Store: a.store, Logger: a.log,
		MaxAgeFunc: func() time.Duration { return a.settings.Get(settings.RetentionIntake, "").Duration() }})
	pruner.AddWorker(workers)
	notifier, err := notify.NewWorker(notify.WorkerConfig{Router: notifications, Log: a.store, Logger: a.log, Registerer: a.registry})
	if err != nil {
		return err
	}
	notifier.AddWorker(workers)
	a.jobs, err = a.db.NewJobClient(&river.Config{
		ID: opts.ClientID, Logger: quietRiverLogger(a.log), Workers: workers,
		// The job guard, outermost: a panic of any job is its error.
		Middleware: []rivertype.Middleware{guard.NewJobs(guard.Config{Panics: fm.PanicCounter(), Logger: a.log})},
		Queues: map[string]river.QueueConfig{
			rules.QueueDefault: {MaxWorkers: a.cfg.Workers},
			rules.QueueEvents:  {MaxWorkers: a.cfg.Workers},
			rules.QueueNotes:   {MaxWorkers: noteWorkers(a.cfg.Workers)},
			// Notifications (issue 25): as many as the status comments.
			notify.QueueNotifications: {MaxWorkers: noteWorkers(a.cfg.Workers)},
		},
		FetchCooldown:        50 * time.Millisecond,
		FetchPollInterval:    a.fetchPollInterval(),
		RescueStuckJobsAfter: rescueAfter,
		RetryPolicy:          flows.RetryPolicy{},
		// River inserts periodic jobs on the elected leader only.
		PeriodicJobs: []*river.PeriodicJob{reconciler.PeriodicJob(), sweeper.PeriodicJob(), pruner.PeriodicJob()},
		// A step makes a few GitLab calls; it must end well before a job
		// counts as stuck and is rescued on another replica.
		JobTimeout: jobTimeout(rescueAfter),
	})
	if err != nil {
		return fmt.Errorf("configuring the job queue: %w", err)
	}
	a.gauge = flows.NewActiveGauge(flows.ActiveGaugeConfig{Store: a.store, DB: a.store.DB(), Metrics: fm, ClientIDFunc: a.jobs.ID})
	a.registerReady()
	a.dispatcher, err = webhooks.NewDispatcher(webhooks.DispatcherConfig{Store: a.store, Logger: a.log})
	if err != nil {
		return err
	}
	a.router, err = a.routes(fm)
	return err
}

// noteWorkers is how many status note refreshes one replica runs at once:
// half of workers, at least two. Refreshes are coalesced, so they need
// fewer workers than the step jobs and the webhook deliveries (which get
// workers each); a quarter (at most 2 of the demo's 10) left the comments
// of twenty failing changes tens of seconds behind their steps on a loaded
// race-detector run, past the comment's freshness promise.
func noteWorkers(workers int) int { return max(2, workers/2) }

// fetchPollInterval is how often River looks for due jobs without being
// told. On PostgreSQL a job inserted as available is announced at its
// commit (LISTEN/NOTIFY) and picked up at once; the poll (1 s) is the
// fallback, and what picks up snoozes shorter than River's scheduler
// interval. SQLite has no notifications and the store inserts jobs in its
// own transactions (River's in-process trigger only follows inserts made
// through the working client outside a transaction), so every job would
// wait for the poll: 1 s per step. There it is 50 ms: an idle fetch is one
// indexed read of a local file, without a disk write.
func (a *App) fetchPollInterval() time.Duration {
	if a.db.Engine() == config.EngineSQLite {
		return 50 * time.Millisecond
	}
	return time.Second
}

// Handler returns the HTTP router.
func (a *App) Handler() http.Handler { return a.router }

// Engine returns the flow engine.
func (a *App) Engine() *flows.Engine { return a.engine }

// Store returns the store.
func (a *App) Store() store.Store { return a.store }

// Database names the engine and the database the App runs on ("sqlite
// /path/changebot.db", "postgres postgres://…" without the password).
func (a *App) Database() string { return a.db.Describe() }

// Run serves HTTP on ln and runs the job workers until ctx is cancelled
// (SIGTERM). Then the replica turns not ready (/readyz answers 503) but keeps
// answering webhooks, callbacks and the API for ShutdownDelay, so load
// balancers stop sending to it before it stops listening and no delivery
// sent meanwhile is refused; then it stops intake, lets running requests and
// jobs finish within ShutdownGrace, and returns. Unfinished work stays in
// the database for the next start or another replica.
func (a *App) Run(ctx context.Context, ln net.Listener) error {
	// The workers, the settings cache and the gauge run until the drain
	// ends, not until ctx: River cancels the jobs of a cancelled start
	// context instead of letting them finish.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	// The cache starts even when the settings are unreadable (migrations
	// not applied): config values and defaults, retried every TTL.
	if err := a.settings.Start(runCtx); err != nil {
		return fmt.Errorf("starting settings cache: %w", err)
	}
	defer a.settings.Close()
	stopJobStarts, err := a.startJobs(runCtx)
	if err != nil {
		return err
	}
	gaugeCtx, stopGauge := context.WithCancel(runCtx)
	gaugeDone := make(chan struct{})
	go func() {
		defer close(gaugeDone)
		a.gauge.Run(gaugeCtx, flows.ActiveGaugeInterval, func(err error) { a.log.Warn("refreshing the active changes gauge", "err", err) })
	}()
	defer func() { stopGauge(); <-gaugeDone }()
	clockCtx, stopClock := context.WithCancel(runCtx)
	clockDone := make(chan struct{})
	go func() { defer close(clockDone); a.clock.Run(clockCtx, budget.ClockSyncInterval) }()
	defer func() { stopClock(); <-clockDone }()
	dispatchCtx, stopDispatch := context.WithCancel(runCtx)
	dispatchDone := make(chan struct{})
	go func() { defer close(dispatchDone); a.dispatcher.Run(dispatchCtx) }()
	defer func() { stopDispatch(); <-dispatchDone }()
	srv := &http.Server{Handler: a.router, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	a.log.Info("changebot serving", "addr", ln.Addr().String())
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	if serveErr == nil && a.cfg.ShutdownDelay > 0 {
		a.draining.Store(true)
		a.log.Info("shutting down: not ready, still accepting requests for the shutdown delay", "delay", a.cfg.ShutdownDelay.String())
		t := time.NewTimer(a.cfg.ShutdownDelay)
		select {
		case <-t.C:
		case serveErr = <-errc:
		}
		t.Stop()
	}
	a.draining.Store(true)
	grace := a.cfg.ShutdownGrace
	if grace <= 0 {
		grace = 20 * time.Second
	}
	a.log.Info("shutting down: intake stopped, draining requests and jobs", "grace", grace.String())
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = srv.Shutdown(sctx)
	// Every request waits for its own delivery's commit, so Shutdown has
	// drained the group commit already; Close makes that explicit and
	// refuses a delivery of a request Shutdown gave up on.
	if err := a.closeIntake(sctx); err != nil {
		a.log.Warn("webhook intake did not drain within the grace period", "err", err)
	}
	// The deliveries the last requests stored get their jobs now rather
	// than at another replica's next pass.
	if _, err := a.dispatcher.Pass(sctx); err != nil {
		a.log.Warn("dispatching the last stored webhook deliveries", "err", err)
	}
	stopJobStarts()
	if err := a.jobs.Stop(sctx); err != nil {
		a.log.Warn("job workers did not stop within the grace period", "err", err)
		_ = a.jobs.StopAndCancel(context.Background())
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// closeIntake closes the webhook handler's group commit, if it has one.
func (a *App) closeIntake(ctx context.Context) error {
	if a.intake == nil {
		return nil
	}
	return a.intake.Close(ctx)
}

// jobsRetryInterval is how often a replica started before the migrations
// checks whether they are applied, to start its job workers.
const jobsRetryInterval = 5 * time.Second

// startJobs starts the job workers with ctx. When the database is not
// migrated yet (River's tables are missing), the replica keeps serving
// (/readyz answers 503) and a goroutine starts the workers once the
// migrations are applied. The returned function stops that goroutine and
// waits for it (a no-op when the workers started at once); after it, the
// workers are either started or will not be. Other failures are returned.
// jobTimeout is how long one job may run: a step makes a few GitLab calls;
// it must end well before a job counts as stuck and is rescued on another
// replica.
func jobTimeout(rescueAfter time.Duration) time.Duration { return min(time.Minute, rescueAfter/2) }

func (a *App) startJobs(ctx context.Context) (stop func(), err error) {
	err = a.jobs.Start(ctx)
	if err == nil {
		// The commit gate learns the merges recorded before this start.
		if n, serr := a.engine.SeedMergeClaims(ctx); serr != nil {
			a.log.Warn("seeding the commit gate with recorded merges failed", "err", serr)
		} else {
			a.log.Debug("commit gate seeded with recorded merges", "merges", n)
		}
		return func() {}, nil
	}
	if _, current, serr := a.db.MigrationStatus(); serr != nil || current {
		return nil, fmt.Errorf("starting job workers: %w", err)
	}
	a.log.Warn("job workers wait for the migrations (changebot migrate)", "err", err)
	retryCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(jobsRetryInterval)
		defer t.Stop()
		for {
			select {
			case <-retryCtx.Done():
				return
			case <-t.C:
			}
			if _, current, err := a.db.MigrationStatus(); err != nil || !current {
				continue
			}
			// ctx, not retryCtx: stopping the retries must not cancel the
			// running workers (Run stops them gracefully).
			if err := a.jobs.Start(ctx); err != nil {
				a.log.Warn("starting job workers", "err", err)
				continue
			}
			a.log.Info("migrations applied, job workers started")
			return
		}
	}()
	return func() { cancel(); <-done }, nil
}

// Close releases the database (and the SQLite file's lock).
func (a *App) Close() { a.db.Close() }

// periodicConfig returns the reconciler's and the sweeper's configuration
// from the runtime settings: reconcile.interval and sweeper.interval read
// now (at start only), reconcile.min_age, reconcile.max_age,
// reconcile.quiet_after and sweeper.after read at every pass, so a change
// applies without a restart (README "Runtime settings").
func (a *App) periodicConfig() (flows.ReconcileConfig, flows.SweepConfig) {
	get := func(key string) time.Duration { return a.settings.Get(key, "").Duration() }
	rc := flows.ReconcileConfig{Interval: get(settings.ReconcileInterval), LiveFunc: func() flows.ReconcileConfig {
		return flows.ReconcileConfig{MinAge: get(settings.ReconcileMinAge), MaxAge: get(settings.ReconcileMaxAge),
			QuietAfter: get(settings.ReconcileQuietAfter)}
	}}
	sc := flows.SweepConfig{Interval: get(settings.SweeperInterval),
		AfterFunc: func() time.Duration { return get(settings.SweeperAfter) }}
	return rc, sc
}

// StartDemo builds the bot `changebot demo` runs (demo.StartFunc): an App
// on the demo's configuration, schema and polling.
func StartDemo(ctx context.Context, p demo.AppParams) (demo.App, error) {
	return NewApp(ctx, p.Config, &AppOpts{Logger: p.Logger, Schema: p.Schema, Poll: p.Poll})
}
