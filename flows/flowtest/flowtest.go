// Package flowtest runs the change flow in-process for tests: a real
// PostgreSQL schema (store/postgres/pgtest), or with CHANGEBOT_TEST_ENGINE=sqlite
// a SQLite file of the test's own (store/sqlite, opened as bot opens it), the
// real flows.Engine wired as bot wires it, the GitLab adapter pointed at gitlabfake, the stand-in approval
// system (approvalfake) and an injected clock the test advances. River jobs
// are worked explicitly, one at a time, through rivertest: no River client
// runs in the background and nothing sleeps. Webhooks the fake GitLab emits
// are captured, and the test delivers them (or drops, duplicates or
// reorders them) when it chooses.
//
// A typical test:
//
//	h := flowtest.New(t, nil)
//	op := h.Submit(t, flowtest.Change("svc"))
//	h.WorkUntilIdle(t)                  // request_approval
//	h.Decide(t, op.ID, "approved")      // the approver's callback
//	h.WorkUntilIdle(t)                  // create branch, commit, MR
//	h.DeliverWebhooks(t)                // pipeline hooks from gitlabfake
//	h.WorkUntilIdle(t)                  // handle: approve, merge
//	h.RequireStep(t, op.ID, flows.HandleMerged)
//
// It must only be imported by tests.
package flowtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"

	"changebot/budget"
	"changebot/flows"
	"changebot/flows/rules"
	"changebot/internal/guard"
	"changebot/platform"
	"changebot/platform/approval"
	"changebot/platform/approval/approvalfake"
	"changebot/platform/github"
	"changebot/platform/github/githubfake"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/routing"
	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
	"changebot/store/sqlite"
	"changebot/templates"
)

// Users and project every harness has.
const (
	// Robot is the bot's GitLab account (Maintainer of the project).
	Robot = "robot"
	// Requester is the default RequestedBy of Change (Developer).
	Requester = "alice"
	// ProjectPath is the project Change targets; its default branch is
	// "main", protected, and pushes to it start a deploy pipeline.
	ProjectPath = "g/config"
	// ExternalURL is the bot's public URL given to the engine.
	ExternalURL = "http://changebot.test"
)

// TicketURL is the base of the approval tickets' pages: the stand-in
// approval system answers "ticket_url": TicketURL + "/" + ticket id.
const TicketURL = "https://approvals.example.test/tickets"

// Start is the harness clock's initial time.
var Start = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// Poll is the polling schedule of a harness unless Opts.Poll is set: the
// production defaults, written out so tests can compute with them.
var Poll = flows.PollConfig{
	ShortInterval: 15 * time.Second, ShortCount: 8, LongInterval: 2 * time.Minute,
	PipelineDeadline: 2 * time.Hour, RebaseDeadline: 15 * time.Minute, DeployDeadline: 6 * time.Hour,
	NoteDelay: 2 * time.Second, MaxRounds: 3, ApproveMaxRetries: 3,
}

// Opts are optional settings of New; nil means defaults.
type Opts struct {
	// Reviewers is the number of reviewer robots (reviewer1, reviewer2, ...,
	// Developers of the project); 0 means 2.
	Reviewers int
	// Poll replaces the polling schedule (flows.EngineConfig.Poll).
	Poll flows.PollConfig
	// Project replaces the project's spec; PathWithNamespace defaults to
	// ProjectPath and the robot, the reviewers and the requester are added
	// to Members.
	Project gitlabfake.ProjectSpec
	// Configure, when set, may change the engine's configuration before the
	// engine is built (ApprovalPolicyFunc, StepHookFunc, ...).
	Configure func(cfg *flows.EngineConfig)
	// Logger receives the engine's logs; nil logs warnings and errors to t.Log.
	Logger *slog.Logger
	// Platform is the platform the engine talks to: store.PlatformGitLab
	// ("" too) builds the GitLab adapter on gitlabfake; store.PlatformGitHub
	// builds the GitHub adapter on githubfake (Harness.GitHub, Harness.Repo:
	// repository ProjectPath, its default branch protected with the check
	// "build" required, the robot a maintainer, the requester and the
	// reviewers writers) and decodes its webhooks as GitHub's. Project,
	// Client, Budget and GitLab are then zero: GitHub has no call budget.
	Platform string
}

// EngineEnv is the environment variable that chooses the database engine of
// every harness: "sqlite" runs it on a SQLite file, anything else (or unset)
// on PostgreSQL. make test runs the flow tests once on each.
const EngineEnv = "CHANGEBOT_TEST_ENGINE"

// The engines a harness runs on (Harness.Engine).
const (
	EnginePostgres = "postgres"
	EngineSQLite   = "sqlite"
)

// TestEngine is the engine EngineEnv chooses.
func TestEngine() string {
	if os.Getenv(EngineEnv) == EngineSQLite {
		return EngineSQLite
	}
	return EnginePostgres
}

// SkipOnSQLite skips t when the tests run on SQLite (EngineEnv), saying
// why: what PostgreSQL-only feature the test reaches into.
func SkipOnSQLite(t testing.TB, why string) {
	t.Helper()
	if TestEngine() == EngineSQLite {
		t.Skipf("PostgreSQL only (%s=sqlite): %s", EngineEnv, why)
	}
}

// Harness is one in-process flow with its fakes. Its fields are the real
// parts; use them directly for anything the methods do not cover.
type Harness struct {
	Clock *Clock
	// DB is the database engine: EnginePostgres or EngineSQLite (see
	// EngineEnv).
	DB string
	// Schema is the PostgreSQL schema; zero on SQLite.
	Schema pgtest.Schema
	// SQLDB is the SQLite database; nil on PostgreSQL.
	SQLDB     *sql.DB
	Store     store.Store
	Engine    *flows.Engine
	GitLab    *gitlabfake.Server
	Client    *gitlab.Client // the adapter the engine uses, pointed at GitLab
	Budget    *budget.Budget // the call budget Client takes from
	Approvals *approvalfake.Server
	Project   gitlabfake.Project
	Metrics   *prometheus.Registry
	// Platform is store.PlatformGitLab or store.PlatformGitHub (Opts.Platform).
	Platform string
	// GitHub is the fake GitHub of a GitHub harness, Repo its repository
	// and GitHubClient the adapter the engine uses; all zero on GitLab.
	GitHub       *githubfake.Server
	Repo         githubfake.Repo
	GitHubClient *github.Client

	limits atomic.Pointer[budget.Limits]
	jobs   jobLister
	work1  func(ctx context.Context, t testing.TB, job *rivertype.JobRow) (*rivertest.WorkResult, error)
	funcs  map[string]flows.JobWorkFunc
	hooks  *hookSink
}

// New builds a harness; everything is closed when the test ends.
func New(t testing.TB, opts *Opts) *Harness {
	t.Helper()
	if opts == nil {
		opts = &Opts{}
	}
	h := &Harness{Clock: NewClock(Start), Metrics: prometheus.NewRegistry(), hooks: newHookSink()}
	t.Cleanup(h.hooks.srv.Close)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	h.DB = TestEngine()
	var err error
	if h.DB == EngineSQLite {
		h.SQLDB, err = sqlite.OpenDB(filepath.Join(t.TempDir(), "changebot.db"))
		if err != nil {
			t.Fatalf("opening the SQLite database: %v", err)
		}
		t.Cleanup(func() { _ = h.SQLDB.Close() })
		if err := sqlite.Migrate(context.Background(), h.SQLDB, nil); err != nil {
			t.Fatalf("migrating the SQLite database: %v", err)
		}
		h.Store, err = sqlite.New(h.SQLDB, &sqlite.StoreOpts{NowFunc: h.Clock.Now, Logger: log})
	} else {
		h.Schema = pgtest.New(t)
		h.Store, err = postgres.New(h.Schema.Pool, &postgres.StoreOpts{Schema: h.Schema.Name, NowFunc: h.Clock.Now, Logger: log})
	}
	if err != nil {
		t.Fatalf("building the store: %v", err)
	}

	h.Platform = opts.Platform
	if h.Platform == "" {
		h.Platform = store.PlatformGitLab
	}
	var adapter flows.Platform
	decode := gitlab.DecodeHook
	if h.Platform == store.PlatformGitHub {
		adapter, decode = h.newGitHub(t, opts, log), github.DecodeHook
	} else {
		adapter = h.newGitLab(t, opts, log)
	}

	h.Approvals = approvalfake.New(approvalfake.Options{Approver: "carol", TicketURL: TicketURL})
	t.Cleanup(h.Approvals.Close)
	renderer, err := templates.NewRenderer(nil)
	if err != nil {
		t.Fatalf("building the renderer: %v", err)
	}
	poll := opts.Poll
	if poll == (flows.PollConfig{}) {
		poll = Poll
	}
	cfg := flows.EngineConfig{
		Store: h.Store, Adapter: adapter, Platform: h.Platform, Renderer: renderer, Metrics: flows.NewMetrics(h.Metrics), Logger: log,
		Approvals: approval.New(h.Approvals.URL(), nil), ExternalURL: ExternalURL, Poll: poll,
		NowFunc: h.Clock.Now,
	}
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	h.Engine, err = flows.NewEngine(cfg)
	if err != nil {
		t.Fatalf("building the engine: %v", err)
	}
	h.funcs = h.Engine.WorkFuncs()
	// Stored deliveries go through the delivery router, as in bot; comments
	// are the command layer's and are ignored here.
	router, err := routing.NewRouter(routing.RouterConfig{Store: h.Store, Decode: decode,
		Flow: h.Engine, Notes: ignoreNotes{}, Logger: log})
	if err != nil {
		t.Fatalf("building the delivery router: %v", err)
	}
	h.funcs[rules.KindProcessDelivery] = flows.WorkFuncOf(router.Worker())

	// The job guard as bot installs it: a panic of any job is its error.
	var panics *prometheus.CounterVec
	if cfg.Metrics != nil {
		panics = cfg.Metrics.PanicCounter()
	}
	rcfg := &river.Config{Schema: h.Schema.Name, Logger: log, Test: river.TestConfig{Time: h.Clock},
		RetryPolicy: retryPolicy{clock: h.Clock},
		Middleware:  []rivertype.Middleware{guard.NewJobs(guard.Config{Panics: panics, Logger: log})}}
	work := river.Worker[anyJob](&dispatcher{funcs: h.funcs})
	if h.DB == EngineSQLite {
		driver := riversqlite.New(h.SQLDB)
		if h.jobs, err = river.NewClient(driver, rcfg); err != nil {
			t.Fatalf("building the job client: %v", err)
		}
		// Jobs are worked outside any transaction, as River's client works
		// them: SQLite has one write lock, and a transaction held around
		// the job would make every write the job makes wait for it.
		w := rivertest.NewWorker(t, noTxDriver{driver}, rcfg, work)
		h.work1 = func(ctx context.Context, t testing.TB, job *rivertype.JobRow) (*rivertest.WorkResult, error) {
			return w.WorkJob(ctx, t, nil, job)
		}
		return h
	}
	driver := riverpgxv5.New(h.Schema.Pool)
	if h.jobs, err = river.NewClient(driver, rcfg); err != nil {
		t.Fatalf("building the job client: %v", err)
	}
	w := rivertest.NewWorker(t, driver, rcfg, work)
	h.work1 = func(ctx context.Context, t testing.TB, job *rivertype.JobRow) (*rivertest.WorkResult, error) {
		tx, err := h.Schema.Pool.Begin(ctx)
		if err != nil {
			return nil, fmt.Errorf("beginning the job transaction: %w", err)
		}
		defer func() { _ = tx.Rollback(context.Background()) }()
		res, werr := w.WorkJob(ctx, t, tx, job)
		if res == nil {
			return nil, werr
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, fmt.Errorf("committing the job transaction: %w", err)
		}
		return res, werr
	}
	return h
}

// newGitLab builds the fake GitLab, its project and accounts, the call
// budget and the GitLab adapter (Harness.Client) the engine uses.
func (h *Harness) newGitLab(t testing.TB, opts *Opts, log *slog.Logger) flows.Platform {
	t.Helper()
	var err error
	h.GitLab = gitlabfake.New(gitlabfake.Options{WebhookURL: h.hooks.srv.URL, NowFunc: h.Clock.Now})
	t.Cleanup(h.GitLab.Close)
	h.GitLab.AddUser(Robot, "robot-token", gitlabfake.AsBot())
	h.GitLab.AddUser(Requester, "alice-token")
	spec := opts.Project
	if spec.PathWithNamespace == "" {
		spec.PathWithNamespace = ProjectPath
	}
	members := map[string]int{Robot: gitlabfake.AccessMaintainer, Requester: gitlabfake.AccessDeveloper}
	maps(spec.Members, members)
	var tokens []string
	for _, name := range reviewerNames(opts) {
		h.GitLab.AddUser(name, name+"-token", gitlabfake.AsBot())
		members[name] = gitlabfake.AccessDeveloper
		tokens = append(tokens, name+"-token")
	}
	spec.Members = members
	h.Project = h.GitLab.AddProject(spec)
	// No in-client retries: their waits are real time; the job's own
	// backoff runs on the harness clock.
	h.limits.Store(&budget.DefaultLimits)
	h.Budget, err = budget.New(budget.Config{Store: h.Store, NowFunc: h.Clock.Now, Registerer: h.Metrics,
		LimitsFunc: func() budget.Limits { return *h.limits.Load() }})
	if err != nil {
		t.Fatalf("building the call budget: %v", err)
	}
	h.Client, err = gitlab.New(gitlab.Config{BaseURL: h.GitLab.URL(), Token: "robot-token", ReviewerTokens: tokens,
		RetryMax: -1, Logger: log, NowFunc: h.Clock.Now, AccountWaits: h.Budget, Budget: h.Budget})
	if err != nil {
		t.Fatalf("building the GitLab adapter: %v", err)
	}
	return h.Client
}

// reviewerNames are the reviewer robots' names, reviewer1 to reviewerN
// (Opts.Reviewers; 0 means 2); each one's token is its name + "-token".
func reviewerNames(opts *Opts) []string {
	n := opts.Reviewers
	if n == 0 {
		n = 2
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("reviewer%d", i+1)
	}
	return names
}

// GitHubCheck is the required check of a GitHub harness's default branch,
// the one job of githubfake's default CI.
const GitHubCheck = "build"

// newGitHub builds the fake GitHub, its repository ProjectPath and
// accounts (the same names and tokens as on GitLab), and the GitHub
// adapter (Harness.GitHubClient) the engine uses.
func (h *Harness) newGitHub(t testing.TB, opts *Opts, log *slog.Logger) flows.Platform {
	t.Helper()
	h.GitHub = githubfake.New(githubfake.Options{WebhookURL: h.hooks.srv.URL, NowFunc: h.Clock.Now, Logger: log})
	t.Cleanup(h.GitHub.Close)
	h.GitHub.AddUser(Robot, "robot-token")
	h.GitHub.AddUser(Requester, "alice-token")
	collaborators := map[string]string{Robot: "maintain", Requester: "write"}
	var tokens []string
	for _, name := range reviewerNames(opts) {
		h.GitHub.AddUser(name, name+"-token")
		collaborators[name] = "write"
		tokens = append(tokens, name+"-token")
	}
	h.Repo = h.GitHub.AddRepo(githubfake.RepoSpec{FullName: ProjectPath, Collaborators: collaborators,
		RequiredContexts: []string{GitHubCheck}})
	var err error
	// No in-client retries and one read of a pull request whose mergeable
	// is null: their waits are real time; the job's own backoff runs on
	// the harness clock.
	h.GitHubClient, err = github.New(github.Config{BaseURL: h.GitHub.URL(), Token: "robot-token", ReviewerTokens: tokens,
		RetryMax: -1, MergeableReads: -1, Logger: log, NowFunc: h.Clock.Now, AccountWaits: h.Store})
	if err != nil {
		t.Fatalf("building the GitHub adapter: %v", err)
	}
	return h.GitHubClient
}

// jobLister is what the harness asks its River client: the live jobs.
type jobLister interface {
	JobList(ctx context.Context, params *river.JobListParams) (*river.JobListResult, error)
}

var (
	_ jobLister = (*river.Client[pgx.Tx])(nil)
	_ jobLister = (*river.Client[*sql.Tx])(nil)
)

// noTxDriver is River's SQLite driver whose transaction executor is the
// database's own executor: rivertest's worker then records the attempt and
// the outcome in statements of their own (each its own short write), not
// in a transaction held around the job. Its Commit and Rollback do nothing.
type noTxDriver struct{ *riversqlite.Driver }

// UnwrapExecutor implements riverdriver.Driver; tx is ignored (nil).
func (d noTxDriver) UnwrapExecutor(*sql.Tx) riverdriver.ExecutorTx {
	return noTxExecutor{d.GetExecutor()}
}

type noTxExecutor struct{ riverdriver.Executor }

func (noTxExecutor) Commit(context.Context) error   { return nil }
func (noTxExecutor) Rollback(context.Context) error { return nil }

// RequirePostgres skips t on a SQLite harness, naming the PostgreSQL-only
// feature the test reaches into (h.Schema, row locks, pool statistics).
func (h *Harness) RequirePostgres(t testing.TB, why string) {
	t.Helper()
	if h.DB != EnginePostgres {
		t.Skipf("PostgreSQL only (%s=sqlite): %s", EngineEnv, why)
	}
}

func maps(src, dst map[string]int) {
	for k, v := range src {
		dst[k] = v
	}
}

// ignoreNotes is the harness's note handler: flows has no commands.
type ignoreNotes struct{}

func (ignoreNotes) HandleNote(context.Context, int64, platform.HookEvent) (string, error) {
	return flows.OutcomeIgnored, nil
}

// AddWorkFunc makes WorkUntilIdle work jobs of kind with f (for workers that
// live outside flows, such as a delivery router's). It replaces a flows
// worker of the same kind.
func (h *Harness) AddWorkFunc(kind string, f flows.JobWorkFunc) { h.funcs[kind] = f }

// SetBudget replaces the limits of the GitLab call budget (they start as
// budget.DefaultLimits); the next call reads them, as runtime settings.
func (h *Harness) SetBudget(l budget.Limits) { h.limits.Store(&l) }

// DrainBudget takes calls of the robot's budget, at person priority, until
// it holds fewer than left + 1 (by the harness clock): the calls other work
// made meanwhile are spent by someone else.
func (h *Harness) DrainBudget(t testing.TB, left float64) {
	t.Helper()
	account, err := gitlab.AccountOf(h.GitLab.URL(), "robot-token")
	if err != nil {
		t.Fatal(err)
	}
	for {
		wait, got, err := h.Budget.TakeCall(context.Background(), account, platform.PriorityPerson)
		if err != nil {
			t.Fatalf("draining the call budget: %v", err)
		}
		if wait > 0 || got < left+1 {
			return
		}
	}
}

// Advance moves the harness clock forward by d. Jobs scheduled or snoozed
// up to the new time become due for WorkUntilIdle.
func (h *Harness) Advance(d time.Duration) { h.Clock.Advance(d) }

// Now is the harness clock's time.
func (h *Harness) Now() time.Time { return h.Clock.Now() }

// Change returns submit parameters for subject on the harness project with
// one file, approval first; adjust the fields a test cares about.
func Change(subject string) flows.SubmitParams {
	return flows.SubmitParams{SubjectID: subject, TargetKey: "prod", Project: ProjectPath, Title: "Change " + subject,
		RequestedBy: Requester, ApprovalFirst: true,
		Files: []store.File{{Path: "services/" + subject + ".yaml", Content: "replicas: 2\n"}}}
}

// Submit submits p through the engine (as POST /api/v1/changes does) and
// fails the test unless a new operation was created.
func (h *Harness) Submit(t testing.TB, p flows.SubmitParams) store.Operation {
	t.Helper()
	op, created, err := h.Engine.Submit(context.Background(), p)
	if err != nil {
		t.Fatalf("submitting %s: %v", p.SubjectID, err)
	}
	if !created {
		t.Fatalf("submitting %s: no new operation (idempotency key seen)", p.SubjectID)
	}
	return op
}

// Op reads operation id.
func (h *Harness) Op(t testing.TB, id string) store.Operation {
	t.Helper()
	op, err := h.Store.GetOperation(context.Background(), h.Store.DB(), id)
	if err != nil {
		t.Fatalf("reading operation %s: %v", id, err)
	}
	return op
}

// Binding reads the binding of operation id (its subject and target).
func (h *Harness) Binding(t testing.TB, id string) store.Binding {
	t.Helper()
	op := h.Op(t, id)
	b, err := h.Store.GetBinding(context.Background(), h.Store.DB(), op.SubjectID, op.TargetKey)
	if err != nil {
		t.Fatalf("reading binding of %s: %v", id, err)
	}
	return b
}

// Events reads operation id's events, oldest first.
func (h *Harness) Events(t testing.TB, id string) []store.Event {
	t.Helper()
	ev, err := h.Store.ListEvents(context.Background(), h.Store.DB(), id)
	if err != nil {
		t.Fatalf("reading events of %s: %v", id, err)
	}
	return ev
}

// Steps returns the steps operation id went through, from its events: the
// first step, then the target of every transition that changed the step.
func (h *Harness) Steps(t testing.TB, id string) []rules.StepCode {
	t.Helper()
	var steps []rules.StepCode
	for _, e := range h.Events(t, id) {
		if e.ToStep == 0 || (len(steps) > 0 && steps[len(steps)-1] == rules.StepCode(e.ToStep)) {
			continue
		}
		steps = append(steps, rules.StepCode(e.ToStep))
	}
	return steps
}

// RequireStep fails the test unless operation id is at step want; it
// returns the operation.
func (h *Harness) RequireStep(t testing.TB, id string, want rules.StepCode) store.Operation {
	t.Helper()
	op := h.Op(t, id)
	if got := rules.StepCode(op.Step); got != want {
		t.Fatalf("operation %s is at %s (status %s, detail %q), want %s; steps so far %v",
			id, got, op.Status, op.Detail, want, h.Steps(t, id))
	}
	return op
}

// Decide sends the approval system's decision ("approved", "rejected",
// "withdrawn") for operation id through Engine.AcceptApproval, as its signed
// callback would, with the ticket and ext of the request approvalfake
// received, and returns the engine's result. The request id is
// "req-<ticket>", as approvalfake's automatic decisions use; use
// Engine.AcceptApproval directly for another one.
func (h *Harness) Decide(t testing.TB, id, decision string) string {
	t.Helper()
	cb := rules.ApprovalCallback{RequestID: "req-" + id, OperationID: id, Decision: decision, Approver: "carol"}
	for _, r := range slices.Backward(h.Approvals.Requests()) {
		if r.OperationID == id {
			cb.RequestID, cb.TicketID, cb.Ext = "req-"+r.TicketID, r.TicketID, r.Ext
			break
		}
	}
	res, err := h.Engine.AcceptApproval(context.Background(), cb)
	if err != nil {
		t.Fatalf("approval callback for %s: %v", id, err)
	}
	return res
}

// MR returns the fake GitLab's view of operation id's merge request.
func (h *Harness) MR(t testing.TB, id string) gitlabfake.MRSnapshot {
	t.Helper()
	op := h.Op(t, id)
	mr, ok := h.GitLab.MergeRequest(op.ProjectID, op.MRIID)
	if !ok {
		t.Fatalf("operation %s has no merge request in the fake GitLab (project %d, !%d)", id, op.ProjectID, op.MRIID)
	}
	return mr
}

// PR returns the fake GitHub's view of operation id's pull request (a
// GitHub harness only).
func (h *Harness) PR(t testing.TB, id string) githubfake.PullSnapshot {
	t.Helper()
	op := h.Op(t, id)
	if h.GitHub == nil {
		t.Fatalf("PR on a %s harness", h.Platform)
	}
	pr, ok := h.GitHub.PullRequest(op.ProjectID, op.MRIID)
	if !ok {
		t.Fatalf("operation %s has no pull request in the fake GitHub (repository %d, #%d)", id, op.ProjectID, op.MRIID)
	}
	return pr
}

// Settle waits until the fake GitLab has finished its asynchronous work
// (pipelines that will end, rebases, webhook sends to the capture). Every
// harness method that reads or works calls it first.
func (h *Harness) Settle(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if h.GitHub != nil {
		if err := h.GitHub.WaitIdle(ctx); err != nil {
			t.Fatalf("the fake GitHub did not settle: %v", err)
		}
		return
	}
	if err := h.GitLab.WaitIdle(ctx); err != nil {
		t.Fatalf("the fake GitLab did not settle: %v", err)
	}
}

// testWriter writes logs to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// Clock is the harness clock: the engine's, the store's, the fake GitLab's
// and River's (rivertype.TimeGenerator) time. It only moves when told.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NowOrNil returns the clock's time (always stubbed), for River.
func (c *Clock) NowOrNil() *time.Time {
	now := c.Now()
	return &now
}

// Advance moves the clock forward by d (d must not be negative).
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		panic("flowtest: the clock never goes back")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// retryPolicy is flows.RetryPolicy on the harness clock.
type retryPolicy struct{ clock *Clock }

// NextRetry implements river.ClientRetryPolicy.
func (p retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	return p.clock.Now().Add(time.Until(flows.RetryPolicy{}.NextRetry(job)))
}

// hookSink is the webhook receiver of the fake GitLab or GitHub: it keeps
// every webhook until a test takes it (a GitHub one in the same shape:
// Event is X-GitHub-Event, IdempotencyKey X-GitHub-Delivery, ProjectID
// the repository id).
type hookSink struct {
	srv     *httptest.Server
	mu      sync.Mutex
	pending []gitlabfake.SentWebhook
}

func newHookSink() *hookSink {
	s := &hookSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading body", http.StatusBadRequest)
			return
		}
		var p struct {
			ProjectID int64 `json:"project_id"`
			Project   struct {
				ID int64 `json:"id"`
			} `json:"project"`
			Repository struct {
				ID int64 `json:"id"`
			} `json:"repository"`
		}
		_ = json.Unmarshal(body, &p)
		hook := gitlabfake.SentWebhook{
			Event: r.Header.Get("X-Gitlab-Event"), IdempotencyKey: r.Header.Get("Idempotency-Key"),
			WebhookUUID: r.Header.Get("X-Gitlab-Webhook-UUID"), EventUUID: r.Header.Get("X-Gitlab-Event-UUID"),
			ProjectID: max(p.ProjectID, p.Project.ID), Body: body, Status: http.StatusOK,
		}
		if ev := r.Header.Get("X-GitHub-Event"); ev != "" {
			// GitHub's: the event header, X-GitHub-Delivery as the key and
			// the repository as the project.
			hook.Event, hook.IdempotencyKey, hook.ProjectID = ev, r.Header.Get("X-GitHub-Delivery"), p.Repository.ID
		}
		s.mu.Lock()
		s.pending = append(s.pending, hook)
		s.mu.Unlock()
	}))
	return s
}
