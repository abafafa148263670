package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"changebot/api"
	"changebot/api/backend"
	"changebot/commands"
	"changebot/config"
	"changebot/flows"
	"changebot/internal/guard"
	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/webhooks"
)

// intakeCloser is a webhook handler with a group commit to drain (Run
// closes it after the HTTP server stopped).
type intakeCloser interface {
	Close(ctx context.Context) error
}

// intakeDispatcher is the dispatcher the webhook intake stores for: on
// PostgreSQL a batch is stored by one autocommit statement and its jobs are
// enqueued by the dispatcher (one durable round trip per request, issue
// 12). On SQLite nil: the intake stores a batch with its jobs in one
// transaction, which costs no network round trip, and a second write
// transaction per batch would queue on SQLite's one writer.
// isReviewer reports whether username is one of the adapter's reviewer
// robots (webhooks.GitLabConfig.IsReviewer), asking it without a call; an
// adapter that cannot tell says no.
func (a *App) isReviewer(username string) bool {
	r, ok := a.gitlab.(interface{ IsReviewer(string) bool })
	return ok && r.IsReviewer(username)
}

func (a *App) intakeDispatcher() *webhooks.Dispatcher {
	if a.db.Engine() != config.EnginePostgres {
		return nil
	}
	return a.dispatcher
}

func (a *App) routes(fm *flows.Metrics) (http.Handler, error) {
	wm := webhooks.NewMetrics(a.registry)
	var hook http.Handler
	var err error
	if a.cfg.Platform == config.PlatformGitHub {
		hook, err = a.githubHook(wm)
	} else {
		var gl *webhooks.GitLabHandler
		gl, err = webhooks.NewGitLabHandler(webhooks.GitLabConfig{Secrets: a.cfg.WebhookSecrets,
			MaxBodyBytes: a.cfg.MaxBodyBytes, Store: a.store, Dispatcher: a.intakeDispatcher(), Decode: gitlab.DecodeHook, Logger: a.log, Metrics: wm,
			NoteHasCommand: commands.MayHoldCommand, IsReviewer: a.isReviewer, MayAdopt: a.mayAdopt})
		hook = gl
	}
	if err != nil {
		return nil, err
	}
	if c, ok := hook.(intakeCloser); ok {
		a.intake = c
	}
	cbCfg := webhooks.CallbackConfig{Secret: a.cfg.CallbackSecret, MaxBodyBytes: a.cfg.MaxBodyBytes,
		Approvals: a.engine, Deploys: a.engine, Logger: a.log, Metrics: wm}
	approvalCfg := cbCfg
	approvalCfg.OnBadSignature = a.refusals.Refused
	approvalCB, err := webhooks.NewApprovalCallbackHandler(approvalCfg)
	if err != nil {
		return nil, err
	}
	deployCB, err := webhooks.NewDeployCallbackHandler(cbCfg)
	if err != nil {
		return nil, err
	}
	handler, err := api.New(api.Config{Engine: backend.Engine{Flows: a.engine, Settings: a.settings},
		Store: backend.Store{Store: a.store, Settings: a.settings, BudgetLeft: a.budgetLeft}, Settings: backend.Settings{Cache: a.settings},
		Queues: backend.Queues{Flows: a.engine, Store: a.store}, Notifications: backend.Notifications{Store: a.store}, Rollouts: backend.Rollouts{Store: a.store}, Refusals: a.refusals,
		Tokens: a.cfg.APITokens, ExternalURL: a.cfg.ExternalURL, MaxBodyBytes: a.cfg.MaxBodyBytes, SessionTTL: a.cfg.WebSessionTTL,
		Logger: a.log, NowFunc: a.now})
	if err != nil {
		return nil, err
	}
	r := mux.NewRouter()
	// One fallback for every route, the API's and the intake's.
	fallback := api.Fallback(r)
	r.NotFoundHandler, r.MethodNotAllowedHandler = fallback, fallback
	r.Handle(a.cfg.WebhookPath(), hook).Methods(http.MethodPost)
	r.Handle("/callbacks/approval", api.TextInput(cbCfg.MaxBodyBytes, true, approvalCB)).Methods(http.MethodPost)
	r.Handle("/callbacks/deploy", api.TextInput(cbCfg.MaxBodyBytes, true, deployCB)).Methods(http.MethodPost)
	handler.Mount(r)
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	r.HandleFunc("/readyz", a.readyz)
	r.Handle("/metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
	// The HTTP guard around every handler (STYLE 13): a panic answers 500,
	// counts changebot_panics_total{where="http"} and is logged.
	guarded := guard.HTTP(guard.Config{Panics: fm.PanicCounter(), Logger: a.log}, api.TextInput(a.cfg.MaxBodyBytes, false, r))
	return api.AccessLog(a.log, r, guarded), nil
}

// writeJSON answers status with v as JSON, in the API's shape.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *App) readyz(w http.ResponseWriter, r *http.Request) {
	if status := a.readiness(r.Context()); status != "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": status})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// readiness returns why this replica is not ready ("" when it is): it is
// shutting down, the database is unreachable, or the migrations are not
// applied. /readyz and changebot_ready both answer from it.
func (a *App) readiness(ctx context.Context) string {
	if a.draining.Load() {
		return "shutting down"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := a.store.Ping(ctx); err != nil {
		return "database unreachable"
	}
	if _, current, err := a.db.MigrationStatus(); err != nil || !current {
		return "migrations not applied: run changebot migrate"
	}
	return ""
}

// registerReady exports changebot_ready: 1 when this replica would answer
// /readyz with 200, else 0, checked at each scrape.
func (a *App) registerReady() {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "changebot_ready",
		Help: "1 when this replica is ready (GET /readyz answers 200: database reachable, migrations applied, not shutting down), else 0; read at each scrape."},
		func() float64 {
			if a.readiness(context.Background()) != "" {
				return 0
			}
			return 1
		})
	// A registry shared by several Apps (tests) keeps the first one.
	_ = a.registry.Register(g)
}

// gitlabMetrics counts GitLab calls (changebot_gitlab_calls_total) and
// their latency.
type gitlabMetrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newGitLabMetrics(reg prometheus.Registerer) *gitlabMetrics {
	m := &gitlabMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "changebot_gitlab_calls_total",
			Help: "GitLab API calls by endpoint and HTTP status (0: no answer)."}, []string{"endpoint", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "changebot_gitlab_call_duration_seconds",
			Help: "GitLab API call latency by endpoint, in seconds.", Buckets: prometheus.DefBuckets}, []string{"endpoint"}),
	}
	reg.MustRegister(m.calls, m.duration)
	return m
}

func (m *gitlabMetrics) observe(endpoint string, status int, d time.Duration) {
	m.calls.WithLabelValues(endpoint, fmt.Sprint(status)).Inc()
	m.duration.WithLabelValues(endpoint).Observe(d.Seconds())
}

// budgetLeft is the GitLab call budget's calls left per account (the
// overview page's health line); nil without a budget (GitHub).
func (a *App) budgetLeft() map[string]float64 {
	if a.calls == nil {
		return nil
	}
	return a.calls.Left()
}

// mayAdopt reports whether a merge request webhook of ev's project may adopt
// or let go of a developer's merge request (webhooks.GitLabConfig.MayAdopt):
// adoption is on there and the hook touches the adoption label or requests
// reviewers; or whether it may bring a developer's .changebot.yml to check
// (an open, a reopen, a new head). It makes no call.
func (a *App) mayAdopt(ev platform.HookEvent) bool {
	adopt := a.engine.AdoptConfig()
	if h := ev.MergeRequest; h != nil && h.MayChangePolicy() && a.engine.DevelopersRequest(h) && a.engine.PolicyMatters(ev.ProjectPath) {
		return true // its .changebot.yml, if it changes it, is checked
	}
	return ev.MergeRequest != nil && adopt.Allows(ev.ProjectPath) && ev.MergeRequest.MayAdopt(adopt.LabelOrDefault())
}
