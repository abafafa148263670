package chaos

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"changebot/bot"
	"changebot/cli"
	"changebot/flows"
	"changebot/flows/rules"
	"changebot/platform/approval/approvalfake"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

var (
	flagN        = flag.Int("chaos.n", 20, "number of changes of the chaos run")
	flagSeed     = flag.Uint64("chaos.seed", 0, "seed of the run's randomness (0: from the clock)")
	flagReplicas = flag.Int("chaos.replicas", 3, "number of bot processes")
	flagKill     = flag.Duration("chaos.kill_every", 2*time.Second, "mean interval between SIGKILLs")
	flagRate     = flag.Float64("chaos.rate", 4, "changes submitted per second")
	flagTimeout  = flag.Duration("chaos.settle", 0, "how long changes may take to settle (0: 90s + 1.5s per change, and 30s more per change with chaos.merge_method ff)")
	flagPlatform = flag.String("chaos.platform", "gitlab", "the platform the replicas serve: gitlab (gitlabfake) or github (githubfake)")
	flagMethod   = flag.String("chaos.merge_method", "merge", "the project's merge method: merge, or ff (every merge request must be up to date: the merge queue; on GitHub strict required checks)")
)

// TestMain lets the test binary act as the changebot binary in the replica
// subprocesses, as bot/kill_test.go does.
func TestMain(m *testing.M) {
	if os.Getenv("CHANGEBOT_TEST_SUBPROCESS") == "1" {
		b := cli.Bot{Serve: bot.Serve, StartDemo: bot.StartDemo, Version: bot.BuildVersion().String()}
		os.Exit(cli.Main(os.Args[len(os.Args)-2:], os.Stdout, os.Stderr, b))
	}
	// The replicas inherit the environment, and changebot's environment
	// wins over their config file: a shell's DATABASE_URL or CHANGEBOT_*
	// must not reach them (issue 21.12).
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "DATABASE_URL" || k == "DATABASE_URL_FILE" || strings.HasPrefix(k, "CHANGEBOT_") && !strings.HasPrefix(k, "CHANGEBOT_TEST_") {
			_ = os.Unsetenv(k)
		}
	}
	os.Exit(m.Run())
}

const (
	robot          = "changebot"
	robotToken     = "chaos-robot-token"
	webhookSecret  = "chaos-webhook-secret"
	callbackSecret = "chaos-callback-secret"
	apiToken       = "chaos-api-token"
	projectPath    = "platform/config"
)

var reviewers = []struct{ name, token string }{{"reviewer-1", "chaos-reviewer-1"}, {"reviewer-2", "chaos-reviewer-2"}}

// chaosRetryAfter is the Retry-After of the chaos run's lone 429 answers.
const chaosRetryAfter = time.Second

// Throttle windows of the chaos run: every throttleEvery on average GitLab
// throttles one account (the robot two times in three) until a whole
// second 1 to 2 s ahead, as its per-account rate limits do.
const throttleEvery = 10 * time.Second

// settingsYAML is a fast schedule: short polls, quick rescue of jobs of a
// killed replica, and reconciler and sweeper passes every few seconds. The
// GitLab call budget stays on (every call takes from it, and GitLab's
// throttle windows hold the account through it) but is sized above what
// the run needs: 200 changes submitted in 80 s want about 40 calls a
// second, over the default 1,500 a minute, and a budget-bound run measures
// throughput, not the guarantees checked here. At the default, with a
// replica killed every few seconds, about a tenth of the changes were
// still in CREATE_STARTED after 7 minutes: a create step held by the
// budget starts again from its first call, and a job rescued from a killed
// replica backs off up to 2 minutes. The
// budget's own guarantees are TestBudgetTwoReplicas'.
const settingsYAML = `settings:
  gitlab.budget_per_minute: "6000"
  gitlab.budget_burst: "1000"
  poll.short_interval: 300ms
  poll.short_count: "50"
  poll.long_interval: 1s
  note.delay: 100ms
  jobs.rescue_after: 4s
  reconcile.interval: 2s
  reconcile.min_age: 3s
  reconcile.quiet_after: 3s
  sweeper.interval: 2s
  sweeper.after: 10s
`

// TestChaos is the chaos run (issue 5 point 6). See package doc.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos run skipped under -short")
	}
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	n := *flagN
	t.Logf("chaos run on %s: %d changes, %d replicas, seed %d", *flagPlatform, n, *flagReplicas, seed)
	ctx := context.Background()
	sc := pgtest.New(t)
	st, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}

	// The proxy listens first: the platform's webhooks and the approval
	// system's callbacks go through it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	var rg rig
	switch *flagPlatform {
	case "gitlab":
		rg = newGitLabRig(base, seed, *flagMethod)
	case "github":
		rg = newGitHubRig(base, seed, *flagMethod == "ff")
	default:
		t.Fatalf("-chaos.platform %q: want gitlab or github", *flagPlatform)
	}
	defer rg.close()
	stopVacuum, vacuumDone := make(chan struct{}), make(chan struct{})
	go standInForAutovacuum(ctx, t, sc, stopVacuum, vacuumDone)
	defer func() { close(stopVacuum); <-vacuumDone }()
	stopFaults := rg.start()
	ap := approvalfake.New(approvalfake.Options{Secret: callbackSecret, AutoDecision: "approved", AutoDelay: 200 * time.Millisecond, Approver: "carol"})
	defer ap.Close()

	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "changebot.yaml")
	if err := os.WriteFile(cfgFile, []byte(settingsYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(rg.env(),
		"DATABASE_URL="+sc.URL,
		"CHANGEBOT_WEBHOOK_SECRETS="+webhookSecret,
		"CHANGEBOT_CALLBACK_SECRET="+callbackSecret,
		"CHANGEBOT_API_TOKENS=submitter:"+apiToken,
		"CHANGEBOT_APPROVAL_URL="+ap.URL(),
		"CHANGEBOT_EXTERNAL_URL="+base,
		"CHANGEBOT_LOG_LEVEL=warn",
		"CHANGEBOT_SHUTDOWN_GRACE=2s",
	)
	replicas := make([]*replica, *flagReplicas)
	for i := range replicas {
		replicas[i] = &replica{idx: i, addr: freeAddr(t), cfgFile: cfgFile, env: env, logPath: filepath.Join(dir, fmt.Sprintf("replica-%d.log", i))}
		if err := replicas[i].start(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, r := range replicas {
			r.kill()
		}
		if t.Failed() {
			for _, r := range replicas {
				t.Logf("replica %d log tail:\n%s", r.idx, tail(r.logPath, 40))
			}
		}
	}()
	px := &proxy{replicas: replicas, client: &http.Client{Timeout: 15 * time.Second}}
	srv := &http.Server{Handler: px, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	k := &killer{replicas: replicas, period: *flagKill, down: time.Second, rng: rand.New(rand.NewPCG(seed+1, seed)),
		scraped: map[string]float64{}}
	stopKills, killsDone := make(chan struct{}), make(chan struct{})
	go k.run(ctx, stopKills, killsDone)

	// Submit the changes through the proxy, a few at a time.
	start := time.Now()
	ids := submitAll(t, base, n, time.Duration(float64(time.Second) / *flagRate))
	t.Logf("submitted %d changes in %s", len(ids), time.Since(start).Round(time.Millisecond))

	settle := *flagTimeout
	if settle == 0 {
		settle = 90*time.Second + time.Duration(n)*1500*time.Millisecond
		if *flagMethod == "ff" {
			// Through the merge queue the changes merge one at a time, each
			// rebased, tested and merged under the run's faults and kills
			// (about 20 s a change measured at N=12).
			settle += time.Duration(n) * 30 * time.Second
		}
	}
	byStep, unsettled := waitSettled(ctx, t, st, sc, ids, settle)
	close(stopKills)
	<-killsDone
	stopFaults()
	elapsed := time.Since(start)
	for _, r := range replicas {
		if !r.alive.Load() {
			if err := r.start(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Let in-flight webhooks land and be processed before counting.
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := rg.waitIdle(fctx); err != nil {
		t.Logf("fake %s not idle: %v", *flagPlatform, err)
	}
	cancel()
	waitProcessed(ctx, t, sc, 30*time.Second)

	rep := report{platform: *flagPlatform, n: n, elapsed: elapsed, byStep: byStep, unsettled: unsettled, kills: k.kills}
	rep.collect(ctx, t, rg, st, sc, ids)
	rep.statusCommentsOf(ctx, t, rg, st, ids, 30*time.Second)
	final := map[string]float64{}
	for _, r := range replicas {
		m, err := scrapeValidated(ctx, r.addr)
		if err != nil {
			t.Errorf("scraping replica %d: %v", r.idx, err)
		}
		for s, v := range m {
			final[s] += v
		}
	}
	k.mu.Lock()
	rep.metricBySource = map[string]float64{}
	for s, v := range k.scraped {
		rep.metricBySource[s] += v
	}
	for s, v := range final {
		rep.metricBySource[s] += v
	}
	rep.missedScrapes = k.missed
	killErrs := k.errs
	k.mu.Unlock()
	rep.proxyFailed, rep.proxyRetried = px.failed.Load(), px.retried.Load()
	for _, err := range killErrs {
		t.Errorf("restarting a replica: %v", err)
	}
	rep.mergesInFlight = mergesInFlight(ctx, t, sc)
	rep.print(t)
	for _, v := range rep.violations() {
		t.Errorf("violation: %s", v)
	}
}

// vacuumEvery is how often standInForAutovacuum vacuums and analyzes.
const vacuumEvery = 15 * time.Second

// standInForAutovacuum does autovacuum's work on the run's schema when the
// test PostgreSQL runs without it (autovacuum off, as the shared test
// cluster does for speed): every vacuumEvery it vacuums and analyzes the
// schema's tables. Without it river_job (tens of thousands of rows, most
// of them dead) keeps the statistics of an empty table, River's scheduler
// query (JobSchedule) ran for 20 s and more at a time, scheduled and
// retryable jobs were not made available and the run stalled at about 750
// changes of 1000 (after ANALYZE it went on at once). A production
// database has autovacuum on.
func standInForAutovacuum(ctx context.Context, t *testing.T, sc pgtest.Schema, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	var on string
	if err := sc.Pool.QueryRow(ctx, `SHOW autovacuum`).Scan(&on); err != nil || on == "on" {
		return
	}
	t.Logf("PostgreSQL runs with autovacuum off: the run vacuums and analyzes its tables every %s", vacuumEvery)
	for {
		select {
		case <-stop:
			return
		case <-time.After(vacuumEvery):
		}
		var tables []string
		rows, err := sc.Pool.Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables
			WHERE table_schema = $1 AND table_type = 'BASE TABLE'`, sc.Name)
		if err == nil {
			for rows.Next() {
				var name string
				if rows.Scan(&name) == nil {
					tables = append(tables, name)
				}
			}
			rows.Close()
		}
		if len(tables) == 0 {
			continue
		}
		if _, err := sc.Pool.Exec(ctx, `VACUUM (ANALYZE) `+strings.Join(tables, ", ")); err != nil {
			t.Logf("vacuum: %v", err)
		}
	}
}

// throttleWindow is one window during which GitLab throttled user.
type throttleWindow struct {
	user         string
	start, until time.Time
	first        time.Time // the window's first 429 (report)
}

// throttler opens GitLab throttle windows at random: every period on
// average (half to one and a half of it) it picks an account from users
// and throttles it until a whole second one to two seconds ahead, its 429s
// carrying RateLimit-Reset, Retry-After seconds or an HTTP date in turn
// (never no header: that is a minute's wait, issue 10 point 4's own test).
type throttler struct {
	gl    *gitlabfake.Server
	rng   *rand.Rand
	every time.Duration
	users []string

	mu      sync.Mutex
	windows []throttleWindow
}

var throttleHeaders = []gitlabfake.RateLimitHeaders{gitlabfake.RateLimitResetHeaders,
	gitlabfake.RateLimitRetryAfterSeconds, gitlabfake.RateLimitRetryAfterDate}

func (th *throttler) run(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(th.every/2 + time.Duration(th.rng.Int64N(int64(th.every)))):
		}
		now := time.Now()
		w := throttleWindow{user: th.users[th.rng.IntN(len(th.users))], start: now,
			until: now.Truncate(time.Second).Add(time.Duration(1+th.rng.IntN(2)) * time.Second)}
		th.gl.InjectRateLimit(gitlabfake.RateLimit{User: w.user, Until: w.until, Headers: throttleHeaders[i%len(throttleHeaders)]})
		th.mu.Lock()
		th.windows = append(th.windows, w)
		th.mu.Unlock()
	}
}

func (th *throttler) opened() []throttleWindow {
	th.mu.Lock()
	defer th.mu.Unlock()
	return slices.Clone(th.windows)
}

// windowOf returns the throttle window that answered call c, nil for a
// lone 429.
func windowOf(ws []throttleWindow, c gitlabfake.Call) *throttleWindow {
	for i := range ws {
		if w := &ws[i]; w.user == c.User && !c.At.Before(w.start) && c.At.Before(w.until.Add(100*time.Millisecond)) {
			return w
		}
	}
	return nil
}

// waitProcessed waits until every stored delivery was processed.
func waitProcessed(ctx context.Context, t *testing.T, sc pgtest.Schema, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var n int
		if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE processed_at IS NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("deliveries still unprocessed after %s", timeout)
}

// submitAll submits n changes through the proxy, one every interval,
// retrying each (same
// Idempotency-Key) until it is accepted; it returns the operation ids.
func submitAll(t *testing.T, base string, n int, every time.Duration) []string {
	t.Helper()
	ids := make([]string, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 8)
	done := make(chan struct{})
	for i := range n {
		time.Sleep(every)
		go func() {
			sem <- struct{}{}
			defer func() { <-sem; done <- struct{}{} }()
			ids[i], errs[i] = submitOne(base, i)
		}()
	}
	for range n {
		<-done
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("submitting change %d: %v", i, err)
		}
	}
	return ids
}

func submitOne(base string, i int) (string, error) {
	body, _ := json.Marshal(map[string]any{
		"subject_id": fmt.Sprintf("svc-%04d", i), "target_key": "prod", "project": projectPath,
		"title": fmt.Sprintf("Chaos change %d", i), "requested_by": "alice",
		"files": []map[string]string{{"path": fmt.Sprintf("services/svc-%04d/prod.yaml", i), "content": fmt.Sprintf("replicas: %d\n", i%7+1)}},
	})
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/changes", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("chaos-%d", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			time.Sleep(200 * time.Millisecond)
			continue
		}
		var out struct {
			OperationID string `json:"operation_id"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		_ = resp.Body.Close()
		if (resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusOK) && err == nil && out.OperationID != "" {
			return out.OperationID, nil
		}
		last = resp.Status
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("not accepted within a minute: %s", last)
}

// settled reports whether a step is an end the run accepts: terminal
// (VALIDATED, CLOSED, REJECTED), an explicit failure waiting for /retry, an
// explicit pending code waiting for /resume, or MR_CLOSED (a person closed
// the MR; it waits for a reopen and an operator's /resume).
func settled(code int) bool {
	s, ok := rules.Lookup(rules.StepCode(code))
	return ok && (s.Terminal || s.Retryable() || s.Phase == rules.PhasePending || s.Code == rules.ClosedByPerson)
}

// waitSettled polls the database until every change has settled or the
// timeout passes; it returns the count per step name and the unsettled ids.
func waitSettled(ctx context.Context, t *testing.T, st *postgres.Store, sc pgtest.Schema, ids []string, timeout time.Duration) (map[string]int, []string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	lastLog := time.Now()
	for {
		byStep := map[string]int{}
		var open []string
		for _, id := range ids {
			op, err := st.GetOperation(ctx, st.DB(), id)
			if err != nil {
				t.Fatal(err)
			}
			byStep[rules.StepCode(op.Step).String()]++
			if !settled(op.Step) {
				open = append(open, id)
			}
		}
		if len(open) == 0 || time.Now().After(deadline) {
			return byStep, open
		}
		if time.Since(lastLog) > 15*time.Second {
			t.Logf("waiting: %d of %d settled, by step %s", len(ids)-len(open), len(ids), fmtMap(byStep))
			lastLog = time.Now()
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// report holds the run's figures.
type report struct {
	platform   string
	n          int
	elapsed    time.Duration
	kills      int
	byStep     map[string]int
	unsettled  []string
	unsettledD []string

	mrsMerged       int
	mergeCalls      int
	maxMergesPerMR  int
	mergesAfterDone int
	approveCalls    int
	approvesAfterOK int

	sentNotDropped, dropped, stored int
	ignoredByDesign                 int
	missingKeys                     int

	validated      int
	calledBack     map[string]int
	claims         int
	metricBySource map[string]float64
	missedScrapes  int

	chainsOK, chainsBroken int
	periodic               map[string]int
	sweeps                 int
	proxyFailed            int64
	proxyRetried           int64
	// platformCalls counts the REST calls the fake platform received,
	// faulted those answered 429 or 503 (on GitHub also 403: its rate
	// limits).
	platformCalls, faulted int
	// maxStatusComments is the most status comments one merge request
	// has (goal 1); staleStatus counts the settled changes whose last
	// status comment does not show their final step.
	maxStatusComments, staleStatus int
	// mergesInFlight counts, on a queued branch (chaos.merge_method ff),
	// the changes whose first merge claim came while another change of
	// the branch was between its own first merge claim and its merge.
	mergesInFlight int
	// wrongPlatform counts changes not recording the run's platform,
	// sharedMRs merge requests two changes claim, underApproved merged
	// merge requests without every reviewer robot's approval.
	wrongPlatform, sharedMRs, underApproved int
	// windows are the throttle windows opened. rateLimited counts the 429
	// answers per username; blocked is, per username, how long 429s held
	// the account back (to their window's end, or a lone 429's second;
	// overlaps counted once), over span, the time from the first GitLab
	// call to the last. lateInWindow counts the 429s of a window answered
	// over a second after its first (calls sent after the wait was known).
	windows      []throttleWindow
	rateLimited  map[string]int
	blocked      map[string]time.Duration
	span         time.Duration
	lateInWindow int
	// waitEvents counts the attempt events of jobs that waited out a rate
	// limit (runner's noteDetail with rate_limited).
	waitEvents int
	// limitsInjected and outagesInjected count GitHub's one-shot rate
	// limits and 503s (githubRig).
	limitsInjected, outagesInjected int
}

func (r *report) collect(ctx context.Context, t *testing.T, rg rig, st *postgres.Store, sc pgtest.Schema, ids []string) {
	t.Helper()
	for _, id := range r.unsettled {
		op, err := st.GetOperation(ctx, st.DB(), id)
		if err == nil {
			r.unsettledD = append(r.unsettledD, fmt.Sprintf("%s at %s (v%d, last change %s ago)", id, rules.StepCode(op.Step),
				op.Version, time.Since(op.UpdatedAt).Round(time.Second)))
		}
		logUnsettled(ctx, t, st, sc, id)
	}
	sentKeys := rg.collect(t, r)
	r.sentNotDropped = len(sentKeys)
	storedKeys := map[string]bool{}
	rows, err := sc.Pool.Query(ctx, `SELECT dedupe_key FROM webhook_deliveries`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		storedKeys[k] = true
	}
	rows.Close()
	r.stored = len(storedKeys)
	for k, what := range sentKeys {
		if !storedKeys[k] {
			r.missingKeys++
			t.Logf("sent, not stored: %s %s", k, what)
		}
	}
	// Validated: rows, CALLED_BACK events by source (authoritative), claims.
	if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM operations WHERE status = 'VALIDATED'`).Scan(&r.validated); err != nil {
		t.Fatal(err)
	}
	r.calledBack = map[string]int{}
	rows, err = sc.Pool.Query(ctx, `SELECT split_part(source, ':', 1), count(*) FROM change_events
		WHERE to_step = $1 AND from_step <> to_step GROUP BY 1`, int(rules.CalledBack))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		var c int
		if err := rows.Scan(&s, &c); err != nil {
			t.Fatal(err)
		}
		r.calledBack[s] = c
	}
	rows.Close()
	if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM commit_claims WHERE step = 'CALLED_BACK'`).Scan(&r.claims); err != nil {
		t.Fatal(err)
	}
	r.periodic = map[string]int{}
	rows, err = sc.Pool.Query(ctx, `SELECT kind || ':' || state, count(*) FROM river_job WHERE kind = ANY($1) GROUP BY 1`,
		[]string{rules.KindReconcile, rules.KindSweep})
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var c int
		if err := rows.Scan(&k, &c); err != nil {
			t.Fatal(err)
		}
		r.periodic[k] = c
	}
	rows.Close()
	if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM change_events WHERE actor = $1`, flows.ActorSweeper).Scan(&r.sweeps); err != nil {
		t.Fatal(err)
	}
	if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM change_events WHERE payload @> '{"rate_limited": true}'`).Scan(&r.waitEvents); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		events, err := st.ListEvents(ctx, st.DB(), id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.VerifyChain(events); err != nil {
			r.chainsBroken++
			t.Logf("%s: %v", id, err)
			continue
		}
		r.chainsOK++
	}
}

// logUnsettled logs the last events and jobs of a change that did not
// settle.
func logUnsettled(ctx context.Context, t *testing.T, st *postgres.Store, sc pgtest.Schema, id string) {
	t.Helper()
	evs, err := st.ListEvents(ctx, st.DB(), id)
	if err != nil {
		t.Fatal(err)
	}
	var last []string
	for _, ev := range evs[max(0, len(evs)-6):] {
		last = append(last, fmt.Sprintf("%s %s→%d by %s from %s %s", ev.OccurredAt.Format(time.TimeOnly), ev.Type, ev.ToStep, ev.Actor, ev.Source, ev.Payload))
	}
	var jobs []string
	rows, err := sc.Pool.Query(ctx, `SELECT kind, state, attempt, coalesce(errors[array_length(errors,1)]->>'error','') FROM river_job
		WHERE args->>'operation_id' = $1 ORDER BY id DESC LIMIT 5`, id)
	if err == nil {
		for rows.Next() {
			var kind, state, lastErr string
			var attempt int
			if rows.Scan(&kind, &state, &attempt, &lastErr) == nil {
				jobs = append(jobs, fmt.Sprintf("%s %s attempt %d %s", kind, state, attempt, lastErr))
			}
		}
		rows.Close()
	}
	t.Logf("unsettled %s: last events:\n  %s\n jobs:\n  %s", id, strings.Join(last, "\n  "), strings.Join(jobs, "\n  "))
}

// statusCommentsOf sets r's figures of each change's merge request: the
// most status comments on one, the changes whose last status comment does
// not show their status yet, changes not recording the run's platform,
// merge requests two changes claim, and merged ones without every
// reviewer's approval. The comments are refreshed by jobs of
// their own after the last transition (note.delay), so it reads again for
// up to timeout while some are behind.
func (r *report) statusCommentsOf(ctx context.Context, t *testing.T, rg rig, st *postgres.Store, ids []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r.maxStatusComments, r.staleStatus, r.wrongPlatform, r.sharedMRs, r.underApproved = 0, 0, 0, 0, 0
		claimed := map[int64]bool{}
		for _, id := range ids {
			op, err := st.GetOperation(ctx, st.DB(), id)
			if err != nil {
				t.Fatal(err)
			}
			if op.Platform != r.platform {
				r.wrongPlatform++
			}
			if op.MRIID == 0 {
				continue
			}
			if claimed[op.MRIID] {
				r.sharedMRs++
			}
			claimed[op.MRIID] = true
			if merged, approvals := rg.approvals(op.MRIID); merged && approvals < len(reviewers) {
				r.underApproved++
			}
			notes := rg.statusComments(op.MRIID)
			r.maxStatusComments = max(r.maxStatusComments, len(notes))
			if len(notes) == 0 || !strings.Contains(notes[len(notes)-1], "<sub>"+op.Status+" · step") {
				r.staleStatus++
			}
		}
		if r.staleStatus == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (r *report) print(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== chaos run on %s: %d changes in %s, %d SIGKILLs ===\n", r.platform, r.n, r.elapsed.Round(time.Second), r.kills)
	fmt.Fprintf(&b, "changes settled (VALIDATED, explicit failure or pending): %d/%d  by step %s\n", r.n-len(r.unsettled), r.n, fmtMap(r.byStep))
	for _, d := range r.unsettledD {
		fmt.Fprintf(&b, "  unsettled: %s\n", d)
	}
	fmt.Fprintf(&b, "merge calls: %d for %d merged MRs; successful merges per MR max %d (goal 1); merge calls after the MR was merged %d (goal 0)\n",
		r.mergeCalls, r.mrsMerged, r.maxMergesPerMR, r.mergesAfterDone)
	fmt.Fprintf(&b, "approve calls: %d; after a confirmed approval by the same reviewer at the same head sha %d (goal 0)\n", r.approveCalls, r.approvesAfterOK)
	fmt.Fprintf(&b, "webhook events sent and not dropped %d, stored %d, sent but not stored %d (goal 0); dropped by chaos %d; not stored by design (edited or system notes, notes without a command) %d\n",
		r.sentNotDropped, r.stored, r.missingKeys, r.dropped, r.ignoredByDesign)
	var events int
	for _, c := range r.calledBack {
		events += c
	}
	fmt.Fprintf(&b, "validated: rows %d, CALLED_BACK events %d by source %s, commit claims %d (goal all equal)\n", r.validated, events, fmtMap(r.calledBack), r.claims)
	fmt.Fprintf(&b, "changebot_validated_total summed over processes (scraped before each kill and at the end): %v by source %s; lost with killed processes %v; failed pre-kill scrapes %d\n",
		sumValues(r.metricBySource), fmtMap(r.metricBySource), float64(r.validated)-sumValues(r.metricBySource), r.missedScrapes)
	fmt.Fprintf(&b, "status comments: at most %d on one merge request (goal 1); changes whose status comment does not show their status (after up to 30 s) %d\n",
		r.maxStatusComments, r.staleStatus)
	fmt.Fprintf(&b, "changes not recording %s %d, merge requests claimed twice %d, merged without every reviewer's approval %d (goal 0 each)\n",
		r.platform, r.wrongPlatform, r.sharedMRs, r.underApproved)
	fmt.Fprintf(&b, "hash chains intact %d/%d\n", r.chainsOK, r.chainsOK+r.chainsBroken)
	fmt.Fprintf(&b, "periodic jobs (leader only) %s; steps re-enqueued by the sweeper %d\n", fmtMap(r.periodic), r.sweeps)
	fmt.Fprintf(&b, "%s calls %d, answered 403/429/503 %d (%.1f%%); proxy retries %d, requests no replica answered %d\n",
		r.platform, r.platformCalls, r.faulted, 100*float64(r.faulted)/float64(max(1, r.platformCalls)), r.proxyRetried, r.proxyFailed)
	if r.platform == "github" {
		var limited int
		for _, c := range r.rateLimited {
			limited += c
		}
		fmt.Fprintf(&b, "injected: 503s %d, rate limits (secondary, or primary one time in three) %d; 403/429 answers %d\n",
			r.outagesInjected, r.limitsInjected, limited)
		fmt.Fprintf(&b, "job runs that waited out a rate limit (attempt events): %d\n", r.waitEvents)
		t.Log(b.String())
		return
	}
	byUser := map[string]int{}
	for _, w := range r.windows {
		byUser[w.user]++
	}
	fmt.Fprintf(&b, "throttle windows opened %d by account %s; 429s answered over a second after a window's first %d (sent before the wait was known and answered late, or a replica not holding back)\n",
		len(r.windows), fmtMap(byUser), r.lateInWindow)
	for _, u := range sortedKeys(r.rateLimited) {
		fmt.Fprintf(&b, "rate limit: %s answered 429 %d times, account held back %s of %s (%.1f%%)\n", u, r.rateLimited[u],
			r.blocked[u].Round(time.Second), r.span.Round(time.Second), 100*r.blocked[u].Seconds()/max(1, r.span.Seconds()))
	}
	fmt.Fprintf(&b, "job runs that waited out a rate limit (attempt events): %d\n", r.waitEvents)
	t.Log(b.String())
}

func (r *report) violations() []string {
	var v []string
	if len(r.unsettled) > 0 {
		v = append(v, fmt.Sprintf("%d changes did not settle", len(r.unsettled)))
	}
	if r.maxMergesPerMR > 1 || r.mergesAfterDone > 0 {
		v = append(v, fmt.Sprintf("merged twice: max %d successful merges per MR, %d merge calls after merged", r.maxMergesPerMR, r.mergesAfterDone))
	}
	if r.approvesAfterOK > 0 {
		v = append(v, fmt.Sprintf("%d approve calls after a confirmed approval", r.approvesAfterOK))
	}
	if r.missingKeys > 0 {
		v = append(v, fmt.Sprintf("%d webhook events sent and not dropped were not stored", r.missingKeys))
	}
	var events int
	for _, c := range r.calledBack {
		events += c
	}
	if events != r.validated || r.claims != r.validated {
		v = append(v, fmt.Sprintf("validated rows %d, CALLED_BACK events %d, claims %d", r.validated, events, r.claims))
	}
	// The counter lives in process memory: a flip committed by a replica
	// killed before its increment (or after its last scrape) is lost with the
	// process, so the sum may fall short by what the kills took, never
	// exceed. The authoritative figure is the CALLED_BACK events above.
	if m := int(sumValues(r.metricBySource)); m > r.validated {
		v = append(v, fmt.Sprintf("changebot_validated_total %d exceeds the %d changes validated: a flip was counted twice", m, r.validated))
	}
	if r.chainsBroken > 0 {
		v = append(v, fmt.Sprintf("%d broken hash chains", r.chainsBroken))
	}
	if r.wrongPlatform > 0 || r.sharedMRs > 0 || r.underApproved > 0 {
		v = append(v, fmt.Sprintf("%d changes not recording %s, %d merge requests claimed twice, %d merged without every approval",
			r.wrongPlatform, r.platform, r.sharedMRs, r.underApproved))
	}
	if r.mergesInFlight > 0 {
		v = append(v, fmt.Sprintf("%d merges claimed while another change of the branch was still merging: not the queue's head", r.mergesInFlight))
	}
	if r.maxStatusComments > 1 {
		v = append(v, fmt.Sprintf("a merge request has %d status comments", r.maxStatusComments))
	}
	return v
}

func match(pattern, path string) bool {
	ps, xs := strings.Split(strings.Trim(pattern, "/"), "/"), strings.Split(strings.Trim(path, "/"), "/")
	if len(ps) != len(xs) {
		return false
	}
	for i := range ps {
		if ps[i] != "*" && ps[i] != xs[i] {
			return false
		}
	}
	return true
}

// bodySHA is the "sha" of an approve call's JSON or form body.
func bodySHA(body []byte) string {
	var v struct {
		SHA string `json:"sha"`
	}
	if json.Unmarshal(body, &v) == nil {
		return v.SHA
	}
	q, _ := url.ParseQuery(string(body))
	return q.Get("sha")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare[string])
	return keys
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	ls := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(ls[max(0, len(ls)-lines):], "\n")
}

// mergesInFlight counts, when the run's merge method needs the merge queue
// (chaos.merge_method ff), the changes that claimed their merge while
// another change of the branch was between its first merge claim and its
// merge: a change claims its merge only as the queue's head (issue 22
// point 6), and gives the head back with its move to HANDLE_MERGED, so
// these intervals never overlap. With the plain merge method changes merge
// in parallel and it answers 0.
func mergesInFlight(ctx context.Context, t *testing.T, sc pgtest.Schema) int {
	t.Helper()
	if *flagMethod != "ff" {
		return 0
	}
	rows, err := sc.Pool.Query(ctx, `SELECT c.operation_id, min(c.occurred_at), min(m.occurred_at)
		FROM change_events c JOIN change_events m ON m.operation_id = c.operation_id AND m.to_step = $1 AND m.from_step <> m.to_step
		WHERE c.type = $2 AND c.payload->>'action' = 'merge_claimed'
		GROUP BY c.operation_id ORDER BY 2`, int(rules.HandleMerged), store.EventClaim)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type span struct {
		id         string
		start, end time.Time
	}
	var spans []span
	for rows.Next() {
		var s span
		if err := rows.Scan(&s.id, &s.start, &s.end); err != nil {
			t.Fatal(err)
		}
		spans = append(spans, s)
	}
	n := 0
	for i := 1; i < len(spans); i++ {
		if spans[i].start.Before(spans[i-1].end) {
			n++
			t.Logf("%s claimed its merge at %s while %s merged only at %s", spans[i].id, spans[i].start.Format(time.RFC3339Nano),
				spans[i-1].id, spans[i-1].end.Format(time.RFC3339Nano))
		}
	}
	t.Logf("merge queue: %d merges, each claimed after the one before merged, %d not", len(spans), n)
	return n
}
