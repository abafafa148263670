package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"changebot/demo"
	"changebot/flows"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/settings"
	"changebot/store"
	"changebot/store/postgres/pgtest"
)

// waitingWindow is how long BenchmarkWaitingChanges runs the replica over
// its waiting changes; CHANGEBOT_BENCH_WAIT_WINDOW (a Go duration) changes
// it.
func waitingWindow() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("CHANGEBOT_BENCH_WAIT_WINDOW")); err == nil && d > 0 {
		return d
	}
	return time.Minute
}

// mrGetPath matches a single merge request read, the poll of a pipeline
// wait: /api/v4/projects/<id>/merge_requests/<iid> and nothing after.
var mrGetPath = regexp.MustCompile(`^/api/v4/projects/[^/]+/merge_requests/(\d+)$`)

// BenchmarkWaitingChanges measures what changes waiting on pipelines that
// never report cost (issue 12 point 5, "the cost of 1,000 and 10,000
// waiting changes"): n changes at CREATE_MR_OPENED, each with its merge
// request in gitlabfake (pipelines that stay running) and its poll job,
// seeded through the engine by an app that never runs (with the call
// budget off); then every job but the n poll jobs is deleted (the create
// jobs the seeding left stale, the status-comment refreshes its
// transitions asked for), so that the measured replica starts with exactly
// the waiting changes' poll jobs; then one replica (the production poll
// schedule: every 15 s, then every 2 minutes; the default call budget)
// starts over them on PostgreSQL, every first poll overdue, and is
// measured for waitingWindow: the first minutes of the wait. It reports:
//   - gitlab-calls/s: every call gitlabfake served in the window;
//   - db-tx/s: transactions committed or rolled back on the database in
//     the window (pg_stat_database: run it on a database nobody else uses,
//     TEST_DATABASE_URL=.../bench; the replica is stopped before reading,
//     so its connections flushed their counts);
//   - polls/s and polls/MR/interval: merge request reads per second, and
//     per merge request per 15 s;
//   - calls/poll and tx/poll: the above per poll;
//   - heap-MB: the live heap after a GC at the end of the window.
//
// BENCHMARKS.md has figures.
//
//	TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench?sslmode=disable \
//	  go test ./bot -run '^$' -bench WaitingChanges -benchtime 1x -timeout 30m
func BenchmarkWaitingChanges(b *testing.B) {
	if testing.Short() {
		b.Skip("needs PostgreSQL; skipped under -short")
	}
	for _, n := range benchWaitingSizes() {
		b.Run(fmt.Sprintf("waiting=%d", n), func(b *testing.B) { benchmarkWaitingChanges(b, n) })
	}
}

func benchmarkWaitingChanges(b *testing.B, n int) {
	quiet := slog.New(slog.DiscardHandler)
	if os.Getenv("CHANGEBOT_BENCH_LOG") != "" {
		quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	env, err := demo.NewEnv(pgtest.URL(), false, time.Second, quiet)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(env.Close)
	sc := pgtest.New(b)
	env.Config.DatabaseURL = pgtest.URL()
	// Seeding with the call budget off (where there is one): the seeding's
	// calls and the status comments it asks for are not what is measured.
	ctx := context.Background()
	if _, ok := settings.Lookup(budgetPerMinuteKey); ok {
		env.Config.Settings = map[string]string{budgetPerMinuteKey: "0"}
	}
	seeder, err := NewApp(ctx, env.Config, &AppOpts{Schema: sc.Name, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := seedWaiting(ctx, seeder, env, n); err != nil {
		b.Fatal(err)
	}
	seeder.Close()
	if err := keepPollJobsOnly(ctx, sc.URL, n); err != nil {
		b.Fatal(err)
	}
	env.Config.Settings = nil
	app, err := NewApp(ctx, env.Config, &AppOpts{Schema: sc.Name, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(app.Close)
	conn, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	txCount := func() int64 {
		var v int64
		if err := conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&v); err != nil {
			b.Fatal(err)
		}
		return v
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	// The seeder's closed connections flush their counts: PostgreSQL shows
	// no sign of that this reader could wait for while the measured
	// replica's and the schema's pools stay connected, so it gets a second.
	time.Sleep(time.Second)
	calls0 := len(env.GitLab.Calls())
	tx0 := txCount()
	start := time.Now()
	go func() { done <- app.Run(runCtx, env.Listener) }()
	b.ResetTimer()
	for range b.N {
		time.Sleep(waitingWindow()) // the measured window, not a wait for a state
	}
	b.StopTimer()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	calls := env.GitLab.Calls()[calls0:]
	elapsed := time.Since(start)
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	// The replica's connections are closed: their counts are flushed (a
	// second, as after the seeding).
	time.Sleep(time.Second)
	tx := txCount() - tx0 - 2 // less this reader's own two statements

	polls := 0
	for _, c := range calls {
		if c.Method == "GET" && mrGetPath.MatchString(c.Path) {
			polls++
		}
	}
	secs := elapsed.Seconds()
	b.ReportMetric(float64(len(calls))/secs, "gitlab-calls/s")
	b.ReportMetric(float64(tx)/secs, "db-tx/s")
	b.ReportMetric(float64(polls)/secs, "polls/s")
	b.ReportMetric(float64(polls)/float64(n)/(secs/15), "polls/MR/interval")
	if polls > 0 {
		b.ReportMetric(float64(len(calls))/float64(polls), "calls/poll")
		b.ReportMetric(float64(tx)/float64(polls), "tx/poll")
	}
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MB")
	if os.Getenv("CHANGEBOT_BENCH_ENDPOINTS") != "" {
		by := map[string]int{}
		for _, c := range calls {
			by[c.Method+" "+mrGetPath.ReplaceAllString(c.Path, "/api/v4/projects/:id/merge_requests/:iid")]++
		}
		b.Logf("calls by endpoint: %v", by)
	}
}

// seedWaiting puts n changes of the demo project at CREATE_MR_OPENED
// (merge request first), each with a merge request of its own in
// gitlabfake whose pipelines stay running, and their poll jobs, before the
// replica runs: the robot opens branch and merge request through the
// GitLab API, the engine submits the change and moves it to the wait (the
// create job it queued is left stale: the change moved on), eight changes
// at a time. It returns the changes, in seeding order.
func seedWaiting(ctx context.Context, app *App, env *demo.Env, n int) ([]store.Operation, error) {
	env.GitLab.SetPipelineScript(env.Project.ID, gitlabfake.PipelineScript{MR: []string{"running"}})
	robot, err := gitlab.New(gitlab.Config{BaseURL: env.GitLab.URL(), Token: demo.RobotToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	ops := make([]store.Operation, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if ops[i], errs[i] = seedOne(ctx, app, env, robot, i); errs[i] != nil {
					errs[i] = fmt.Errorf("seeding change %d: %w", i, errs[i])
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ops, nil
}

// seedOne opens the i-th seeded change's branch and merge request and
// moves its change to CREATE_MR_OPENED (seedWaiting).
func seedOne(ctx context.Context, app *App, env *demo.Env, robot *gitlab.Client, i int) (store.Operation, error) {
	branch := fmt.Sprintf("changebot/waiting-%d", i)
	if _, err := robot.CreateBranch(ctx, env.Project.ID, branch, "main"); err != nil {
		return store.Operation{}, err
	}
	mr, err := robot.CreateMergeRequest(ctx, env.Project.ID, platform.CreateMRParams{SourceBranch: branch,
		TargetBranch: "main", Title: fmt.Sprintf("Waiting change %d", i)})
	if err != nil {
		return store.Operation{}, err
	}
	op, _, err := app.Engine().Submit(ctx, flows.SubmitParams{SubjectID: fmt.Sprintf("svc-%d", i), TargetKey: "prod",
		Project: demo.Project, Title: mr.Title, RequestedBy: demo.Requester, ApprovalFirst: false, MaxActive: 1 << 30,
		Files: []store.File{{Path: "a.yaml", Content: "a: 1"}}})
	if err != nil {
		return store.Operation{}, err
	}
	return app.Engine().Transition(ctx, op, rules.CreateMROpened, flows.TransitionOpts{Source: "bench",
		Update: func(o *store.Operation) {
			o.ProjectID, o.TargetBranch = env.Project.ID, "main"
			o.MRIID, o.MRWebURL, o.SourceBranch, o.HeadSHA = mr.IID, mr.WebURL, branch, mr.SHA
		}})
}

// keepPollJobsOnly deletes every River job of the schema at url but the
// pipeline polls (the seeding's stale create jobs and the status-comment
// refreshes its transitions queued: leftovers that are not the waiting
// being measured), makes the polls due now, and checks that exactly n
// poll jobs remain, one per waiting change.
func keepPollJobsOnly(ctx context.Context, url string, n int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DELETE FROM river_job WHERE kind <> $1`, rules.KindAwaitPipeline); err != nil {
		return fmt.Errorf("deleting the seeding's leftover jobs: %w", err)
	}
	// Every first poll overdue and available, as River's scheduler leaves
	// them after a seeding longer than the short interval (not left to the
	// scheduler: with 10,000 scheduled jobs the measured replica polled
	// nothing in its minute).
	if _, err := conn.Exec(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now() WHERE state = 'scheduled'`); err != nil {
		return fmt.Errorf("making the polls due: %w", err)
	}
	var polls, distinct int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT args->>'operation_id') FROM river_job`).Scan(&polls, &distinct); err != nil {
		return fmt.Errorf("counting the poll jobs: %w", err)
	}
	if polls != n || distinct != n {
		return fmt.Errorf("%d poll jobs for %d changes after the seeding, want one for each of %d", polls, distinct, n)
	}
	return nil
}

// benchWaitingSizes are the numbers of waiting changes
// BenchmarkWaitingChanges runs with: 1,000 and 10,000, or the one
// CHANGEBOT_BENCH_WAITING names.
func benchWaitingSizes() []int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("CHANGEBOT_BENCH_WAITING"), &n); err == nil && n > 0 {
		return []int{n}
	}
	return []int{1000, 10000}
}

// runSeeder runs app until gitlabfake has n status comments created, then
// stops it.
func runSeeder(t testing.TB, app *App, env *demo.Env, n int) {
	t.Helper()
	ln, err := demo.Listen("", "bot")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, ln) }()
	waitFor(t, 5*time.Minute, "the seeded changes' status comments", func() bool {
		return env.GitLab.CallCount(http.MethodPost, "/api/v4/projects/*/merge_requests/*/notes") >= n
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("seeding replica: %v", err)
	}
	app.Close()
}

// waitFor polls cond every 50 ms until it holds, failing t after limit
// (a bound against hanging, not a timing assertion) with a message naming
// what it waited for. It is the package's one wait for a condition: the
// tests wait with it where they would otherwise sleep (issue 20 point 5).
// It lives in this file because BenchmarkWaitingChanges is copied into
// worktrees of older commits (BENCHMARKS.md), which must compile it.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting %s for %s", limit, what)
		}
	}
}

// budgetPerMinuteKey is the setting gitlab.budget_per_minute, by name: the
// benchmark also runs on commits from before the budget existed.
const budgetPerMinuteKey = "gitlab.budget_per_minute"
