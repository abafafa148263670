package bot

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"changebot/config"
	"changebot/demo"
	"changebot/platform/approval/approvalfake"
	"changebot/settings"
	"changebot/store/postgres/pgtest"
)

// queueBenchPipeline is how long each pipeline of BenchmarkMergeQueue runs.
const queueBenchPipeline = 400 * time.Millisecond

// BenchmarkMergeQueue measures the merge queue (issue 22): K changes
// submitted at once by 8 submitters to one GitLab project whose merge
// method is ff (every merge request must be up to date to merge), or one
// GitHub repository whose default branch requires strict checks, with
// pipelines (checks) of 400 ms, the fake answering at once, the call
// budget off, PostgreSQL. Every change must reach VALIDATED; reported per
// platform and K:
//
//   - s-to-last: first submit to last VALIDATED, against the target K ×
//     (pipeline + 1 s);
//
//   - failed: changes that ended failed (target 0);
//
//   - rebases/change: PUT …/rebase calls per change (target ≤ 1);
//
//   - mr-pipelines/change: the merge request pipelines gitlabfake started
//     (one per push to a change's branch: its commit, each rebase, each
//     retry), per change;
//
//   - gitlab-calls/change and tx/change as BenchmarkChanges200 counts them;
//     with CHANGEBOT_BENCH_TRACE=1 the log lists the statements per change.
//
//     go test ./bot/ -run '^$' -bench MergeQueue -benchtime 1x -v
func BenchmarkMergeQueue(b *testing.B) {
	if testing.Short() {
		b.Skip("needs PostgreSQL; skipped under -short")
	}
	ks := []int{20, 200}
	if v := os.Getenv("CHANGEBOT_BENCH_QUEUE_K"); v != "" {
		ks = nil
		for _, f := range strings.Split(v, ",") {
			if k, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && k > 0 {
				ks = append(ks, k)
			}
		}
	}
	for _, platform := range []string{config.PlatformGitLab, config.PlatformGitHub} {
		for _, k := range ks {
			b.Run(fmt.Sprintf("platform=%s/K=%d", platform, k), func(b *testing.B) { benchmarkMergeQueue(b, platform, k) })
		}
	}
}

// queueBenchFake is what BenchmarkMergeQueue reads of the fake platform.
type queueBenchFake struct {
	calls     func() int
	rebases   func() int // GitLab's rebase, GitHub's update-branch
	pipelines func() int // GitLab's merge request pipelines, GitHub's workflow runs
}

func benchmarkMergeQueue(b *testing.B, platform string, k int) {
	quiet := slog.New(slog.DiscardHandler)
	var env *demo.Env
	var err error
	var fake queueBenchFake
	if platform == config.PlatformGitHub {
		env, err = demo.NewGitHubEnvAt(demo.Addrs{}, pgtest.URL(), true, queueBenchPipeline, quiet)
		if err != nil {
			b.Fatal(err)
		}
		env.GitHub.SetStrict(env.Repo.ID, true)
		fake = queueBenchFake{calls: func() int { return len(env.GitHub.Calls()) },
			rebases:   func() int { return env.GitHub.CallCount("PUT", "/repos/*/*/pulls/*/update-branch") },
			pipelines: func() int { return env.GitHub.WorkflowRunCount(env.Repo.ID) }}
	} else {
		env, err = demo.NewEnv(pgtest.URL(), true, queueBenchPipeline, quiet)
		if err != nil {
			b.Fatal(err)
		}
		env.GitLab.SetWebhookSenders(benchWebhookSenders)
		env.GitLab.SetMergeMethod(env.Project.ID, "ff")
		fake = queueBenchFake{calls: func() int { return len(env.GitLab.Calls()) },
			rebases:   func() int { return env.GitLab.CallCount("PUT", "/api/v4/projects/*/merge_requests/*/rebase") },
			pipelines: func() int { return env.GitLab.MRPipelineCount(env.Project.ID) }}
	}
	b.Cleanup(env.Close)
	env.Approvals.Close()
	env.Approvals = approvalfake.New(approvalfake.Options{Secret: demo.CallbackSecret, AutoDecision: "approved", Approver: "carol"})
	env.Config.ApprovalURL = env.Approvals.URL()
	env.Config.Workers = config.Default().Workers
	env.Config.Settings = map[string]string{settings.GitLabBudgetPerMinute: "0"}
	if mode := os.Getenv("CHANGEBOT_BENCH_QUEUE_MODE"); mode != "" {
		// queue.mode off: the race before the queue (BENCHMARKS.md's
		// "before"), where changes fail and the run stops with their count.
		env.Config.Settings[settings.QueueMode] = mode
	}
	env.Config.DatabaseURL = pgtest.URL()
	sc := pgtest.New(b)
	mine, err := pgxpool.New(context.Background(), sc.URL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(mine.Close)
	counter := &stmtCounter{n: map[string]int{}}
	app, ctx := runBenchApp(b, env, &AppOpts{Logger: quiet, Schema: sc.Name, PGTracer: counter})
	count := func(ctx context.Context, query string) (int64, error) {
		var n int64
		return n, mine.QueryRow(ctx, query).Scan(&n)
	}
	calls0, rebases0, pipelines0 := fake.calls(), fake.rebases(), fake.pipelines()
	tx0 := counter.tx.Load()
	var elapsed time.Duration
	steps := map[string][]time.Duration{}
	b.ResetTimer()
	for i := range b.N {
		prefix := fmt.Sprintf("queue%d-%d-svc-", k, i)
		start := time.Now()
		ids, submitted, err := submitBatch(ctx, env, prefix, k, benchSubmitters)
		if err != nil {
			b.Fatal(err)
		}
		if err := awaitValidated(ctx, count, prefix, k, time.Duration(k)*(queueBenchPipeline+time.Second)+time.Minute); err != nil {
			failed, _ := count(ctx, `SELECT count(*) FROM operations WHERE subject_id LIKE '`+prefix+`%' AND status IN ('HANDLE_FAILED', 'CREATE_FAILED')`)
			stuck, _ := perChange(ctx, config.EnginePostgres, app, mine, `SELECT step || ' ' || status || ' ' || detail, count(*) FROM operations
				WHERE subject_id LIKE '`+prefix+`%' AND status <> 'VALIDATED' GROUP BY step, status, detail`)
			b.Fatalf("%v (%d failed); not VALIDATED: %s", err, failed, stuck)
		}
		var last time.Time
		if err := mine.QueryRow(ctx, `SELECT max(occurred_at) FROM change_events e JOIN operations o ON o.id = e.operation_id
			WHERE o.subject_id LIKE $1 AND e.to_status = 'VALIDATED'`, prefix+"%").Scan(&last); err != nil {
			b.Fatal(err)
		}
		elapsed += last.Sub(start)
		b.StopTimer()
		if _, _, err := changeTimes(ctx, app, ids, submitted, steps); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	n := b.N * k
	drainQueue(ctx, count, 30*time.Second)
	failed, err := count(ctx, `SELECT count(*) FROM operations WHERE subject_id LIKE 'queue%' AND status IN ('HANDLE_FAILED', 'CREATE_FAILED')`)
	if err != nil {
		b.Fatal(err)
	}
	per := func(v int) float64 { return float64(v) / float64(n) }
	b.ReportMetric(elapsed.Seconds()/float64(b.N), "s-to-last")
	b.ReportMetric(float64(failed), "failed")
	b.ReportMetric(per(fake.rebases()-rebases0), "rebases/change")
	b.ReportMetric(per(fake.pipelines()-pipelines0), "mr-pipelines/change")
	b.ReportMetric(per(fake.calls()-calls0), "platform-calls/change")
	b.ReportMetric(float64(counter.tx.Load()-tx0)/float64(n), "tx/change")
	b.Logf("where a change's time goes (median over the changes, seconds at each step):\n%s", formatSteps(steps))
	if os.Getenv("CHANGEBOT_BENCH_TRACE") != "" {
		b.Logf("statements per change (whole run):\n%s", counter.report(n))
	}
	b.Logf("K=%d: first submit to last VALIDATED %s (target %s)", k, (elapsed / time.Duration(b.N)).Round(time.Millisecond),
		time.Duration(k)*(queueBenchPipeline+time.Second))
}
