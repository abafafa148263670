package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"changebot/platform/approval/approvalfake"
	"changebot/platform/github/githubfake"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
	"changebot/templates"
)

var flagPlatform = flag.String("chaos.platform", "gitlab", "platform of the chaos run: gitlab (gitlabfake) or github (githubfake)")

// The fault schedule of the GitHub chaos run: githubfake faults fire a
// given number of times, so a goroutine replaces the pending fault every
// faultEvery with a new one (a 502 on a random endpoint of the
// repository, one time in ten a secondary rate limit with Retry-After
// 1 s): at most one is pending, so faults on an endpoint called rarely
// (merge) do not pile up. It also drops dropRate of the webhooks and
// redelivers dupRate of them (same X-GitHub-Delivery, as GitHub's
// "Redeliver" does). githubfake does not reorder webhooks. A first
// version added a fault every 250 ms without removing the pending ones:
// they piled up on the merge endpoint, every merge of some changes
// answered 502 until River's backoff outgrew the settle window, and the
// run reported them unsettled.
const (
	faultEvery = time.Second
	dropRate   = .05
	dupRate    = .10
)

// githubFaultPatterns are the repository's endpoints faults are injected
// on (the robot's and the reviewers' writes and reads).
var githubFaultPatterns = []struct{ method, path string }{
	{"GET", "/repos/*/*/pulls/*"}, {"PUT", "/repos/*/*/pulls/*/merge"}, {"POST", "/repos/*/*/pulls/*/reviews"},
	{"GET", "/repos/*/*/pulls/*/reviews"}, {"POST", "/repos/*/*/issues/*/comments"}, {"PATCH", "/repos/*/*/issues/comments/*"},
	{"GET", "/repos/*/*/commits/*/check-runs"}, {"GET", "/repos/*/*/commits/*/status"}, {"POST", "/repos/*/*/pulls"},
	{"POST", "/repos/*/*/git/refs"}, {"POST", "/repos/*/*/git/commits"}, {"GET", "/repos/*/*/compare/**"},
}

// testChaosGitHub is TestChaos on GitHub (`make chaos CHAOS_PLATFORM=github`,
// issue 15): the same replicas, SIGKILLs and proxy, githubfake with the
// faults above, and the same guarantees checked on what GitHub saw: every
// change ends in an explicit state, every pull request is merged by one
// successful merge call, each reviewer approves a head once, and each pull
// request has one status comment.
func testChaosGitHub(t *testing.T) {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	n := *flagN
	t.Logf("GitHub chaos run: %d changes, %d replicas, seed %d", n, *flagReplicas, seed)
	ctx := context.Background()
	sc := pgtest.New(t)
	st, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	gh := githubfake.New(githubfake.Options{WebhookURL: base + "/webhooks/github", WebhookSecret: webhookSecret, CIDuration: time.Second})
	defer gh.Close()
	gh.AddUser(robot, robotToken)
	collaborators := map[string]string{robot: "maintain", "alice": "write"}
	var reviewerTokens []string
	for _, r := range reviewers {
		gh.AddUser(r.name, r.token)
		collaborators[r.name] = "write"
		reviewerTokens = append(reviewerTokens, r.token)
	}
	gh.AddUser("alice", "chaos-alice-token")
	repo := gh.AddRepo(githubfake.RepoSpec{FullName: projectPath, Collaborators: collaborators,
		RequiredContexts: []string{"build"}, RequiredApprovals: 1})

	rng := rand.New(rand.NewPCG(seed, seed+3))
	var rngMu sync.Mutex
	chance := func(p float64) bool { rngMu.Lock(); defer rngMu.Unlock(); return rng.Float64() < p }
	gh.SetDropWebhooks(func(string) bool { return chance(dropRate) })
	stopFaults, faultsDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(faultsDone)
		redelivered := map[string]bool{}
		for {
			select {
			case <-stopFaults:
				return
			case <-time.After(faultEvery):
			}
			rngMu.Lock()
			fp := githubFaultPatterns[rng.IntN(len(githubFaultPatterns))]
			secondary := rng.IntN(10) == 0
			rngMu.Unlock()
			gh.ClearFaults()
			if secondary {
				gh.InjectFault(githubfake.SecondaryRateLimit(fp.method, fp.path, 1, "1"))
			} else {
				gh.InjectFault(githubfake.Fault{Method: fp.method, PathPattern: fp.path, Status: http.StatusBadGateway, Times: 1})
			}
			for _, d := range gh.Webhooks() {
				if !redelivered[d.GUID] && !d.Dropped && d.Status != 0 {
					redelivered[d.GUID] = true
					if chance(dupRate) {
						gh.Redeliver(d.GUID)
					}
				}
			}
		}
	}()
	stopVacuum, vacuumDone := make(chan struct{}), make(chan struct{})
	go standInForAutovacuum(ctx, t, sc, stopVacuum, vacuumDone)
	defer func() { close(stopVacuum); <-vacuumDone }()
	ap := approvalfake.New(approvalfake.Options{Secret: callbackSecret, AutoDecision: "approved", AutoDelay: 200 * time.Millisecond, Approver: "carol"})
	defer ap.Close()

	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "changebot.yaml")
	if err := os.WriteFile(cfgFile, []byte(settingsYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"DATABASE_URL=" + sc.URL,
		"CHANGEBOT_PLATFORM=github",
		"CHANGEBOT_GITHUB_URL=" + gh.URL(),
		"CHANGEBOT_GITHUB_TOKEN=" + robotToken,
		"CHANGEBOT_REVIEWER_TOKENS=" + strings.Join(reviewerTokens, ","),
		"CHANGEBOT_WEBHOOK_SECRETS=" + webhookSecret,
		"CHANGEBOT_CALLBACK_SECRET=" + callbackSecret,
		"CHANGEBOT_API_TOKENS=submitter:" + apiToken,
		"CHANGEBOT_APPROVAL_URL=" + ap.URL(),
		"CHANGEBOT_EXTERNAL_URL=" + base,
		"CHANGEBOT_LOG_LEVEL=warn",
		"CHANGEBOT_SHUTDOWN_GRACE=2s",
	}
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

	start := time.Now()
	ids := submitAll(t, base, n, time.Duration(float64(time.Second) / *flagRate))
	t.Logf("submitted %d changes in %s", len(ids), time.Since(start).Round(time.Millisecond))
	settle := *flagTimeout
	if settle == 0 {
		settle = 90*time.Second + time.Duration(n)*1500*time.Millisecond
	}
	byStep, unsettled := waitSettled(ctx, t, st, sc, ids, settle)
	close(stopKills)
	<-killsDone
	close(stopFaults)
	<-faultsDone
	elapsed := time.Since(start)
	for _, r := range replicas {
		if !r.alive.Load() {
			if err := r.start(); err != nil {
				t.Fatal(err)
			}
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := gh.WaitIdle(fctx); err != nil {
		t.Logf("fake GitHub not idle: %v", err)
	}
	cancel()
	waitProcessed(ctx, t, sc, 30*time.Second)
	// Comments settle after their change: give the last edits a moment.
	time.Sleep(3 * time.Second)

	var violations []string
	if len(unsettled) > 0 {
		violations = append(violations, fmt.Sprintf("%d changes did not settle: %v", len(unsettled), unsettled))
	}
	for _, id := range unsettled {
		evs, err := st.ListEvents(ctx, st.DB(), id)
		if err != nil {
			t.Fatal(err)
		}
		var last []string
		for _, ev := range evs[max(0, len(evs)-6):] {
			p, _ := json.Marshal(ev.Payload)
			last = append(last, fmt.Sprintf("%s %s→%d by %s from %s %s", ev.OccurredAt.Format(time.TimeOnly), ev.Type, ev.ToStep, ev.Actor, ev.Source, p))
		}
		var jobs []string
		rows, err := sc.Pool.Query(ctx, `SELECT kind, state, attempt, coalesce(errors[array_length(errors,1)]->>'error','') FROM river_job WHERE args->>'operation_id' = $1 ORDER BY id DESC LIMIT 5`, id)
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
	numbers := map[int64]string{}
	validated := 0
	for _, id := range ids {
		op, err := st.GetOperation(ctx, st.DB(), id)
		if err != nil {
			t.Fatal(err)
		}
		if op.Status == "VALIDATED" {
			validated++
		}
		if op.Platform != "github" {
			violations = append(violations, fmt.Sprintf("%s records platform %q", id, op.Platform))
		}
		if op.MRIID == 0 {
			continue
		}
		if other, ok := numbers[op.MRIID]; ok {
			violations = append(violations, fmt.Sprintf("%s and %s share pull request #%d", id, other, op.MRIID))
		}
		numbers[op.MRIID] = id
	}
	merges := map[string]int{}    // PR path → successful merge calls
	approvals := map[string]int{} // PR path + reviewer → successful reviews (a new head after a merge round is approved again)
	calls, failed := 0, 0
	for _, c := range gh.Calls() {
		calls++
		if c.Status >= 400 {
			failed++
			continue
		}
		switch {
		case c.Method == "PUT" && strings.HasSuffix(c.Path, "/merge"):
			merges[c.Path]++
		case c.Method == "POST" && strings.HasSuffix(c.Path, "/reviews"):
			approvals[c.Path+" "+c.Login]++
		}
	}
	for path, m := range merges {
		if m > 1 {
			violations = append(violations, fmt.Sprintf("%s merged by %d successful calls", path, m))
		}
	}
	prs := 0
	for number := range numbers {
		pr, ok := gh.PullRequest(repo.ID, number)
		if !ok {
			continue
		}
		prs++
		notes := 0
		for _, c := range gh.Comments(repo.ID, number) {
			if _, ok := templates.ParseMarker(c.Body); ok {
				notes++
			}
		}
		if notes > 1 {
			violations = append(violations, fmt.Sprintf("pull request #%d has %d status comments", number, notes))
		}
		if pr.Merged && len(pr.Approvals) < len(reviewers) {
			violations = append(violations, fmt.Sprintf("pull request #%d merged with approvals %v", number, pr.Approvals))
		}
	}
	maxReviews := 0
	for _, v := range approvals {
		maxReviews = max(maxReviews, v)
	}
	dropped, redelivered := 0, 0
	guids := map[string]int{}
	for _, d := range gh.Webhooks() {
		if d.Dropped {
			dropped++
		}
		guids[d.GUID]++
	}
	for _, c := range guids {
		if c > 1 {
			redelivered++
		}
	}
	var stored int
	if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE dedupe_key LIKE 'github:%'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	kills := k.kills
	k.mu.Unlock()
	summary, _ := json.Marshal(byStep)
	t.Logf("GitHub chaos run: %d changes in %s: %d VALIDATED, by step %s; %d SIGKILLs; %d pull requests; %d GitHub calls (%d answered 4xx/5xx: injected 502s and secondary rate limits, and the fake's own refusals); %d webhooks dropped, %d redelivered, %d deliveries stored; %d reviews (at most %d per pull request and reviewer), %d merges",
		n, elapsed.Round(time.Second), validated, summary, kills, prs, calls, failed, dropped, redelivered, stored,
		sumInts(approvals), maxReviews, sumInts(merges))
	for _, v := range violations {
		t.Errorf("violation: %s", v)
	}
	if validated != n {
		t.Errorf("%d of %d changes VALIDATED", validated, n)
	}
}

func sumInts(m map[string]int) int {
	s := 0
	for _, v := range m {
		s += v
	}
	return s
}
