package flows_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/approval"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
	"changebot/templates"
)

// deploySetup is a database, a fake GitLab with one project whose pushes
// to main start deploy pipelines, and engines over both sharing metrics:
// engine runs at the real clock, later sees the clock 15 minutes ahead
// (so rows written now lie inside the reconciler's default window).
type deploySetup struct {
	setup
	fake    *gitlabfake.Server
	gl      *gitlab.Client
	project gitlabfake.Project
	later   *flows.Engine
	reg     *prometheus.Registry
}

func newDeploySetup(t *testing.T) deploySetup {
	t.Helper()
	flowtest.SkipOnSQLite(t, "builds its PostgreSQL store itself (pgtest, row locks, pgtest.WaitBlockedBy)")
	sc := pgtest.New(t)
	st, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	fake := gitlabfake.New(gitlabfake.Options{})
	t.Cleanup(fake.Close)
	fake.AddUser("robot", "tok", gitlabfake.AsBot())
	proj := fake.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "g/r", Members: map[string]int{"robot": gitlabfake.AccessMaintainer}})
	gl, err := gitlab.New(gitlab.Config{BaseURL: fake.URL(), Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := templates.NewRenderer(nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := flows.NewMetrics(reg)
	newEngine := func(now func() time.Time) *flows.Engine {
		e, err := flows.NewEngine(flows.EngineConfig{Store: st, Adapter: gl, Renderer: r, Metrics: m, NowFunc: now,
			Approvals: approval.New("http://127.0.0.1:1", nil)})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := newEngine(nil)
	later := newEngine(func() time.Time { return time.Now().Add(15 * time.Minute) })
	return deploySetup{setup: setup{engine: e, store: st, sc: sc}, fake: fake, gl: gl, project: proj, later: later, reg: reg}
}

// push adds a commit to main (starting its deploy pipeline, whose outcome
// follows the project's PipelineScript) and returns its sha.
func (s deploySetup) push(t *testing.T) string {
	t.Helper()
	s.fake.PushToTarget(s.project.ID, "main")
	b, err := s.gl.Branch(context.Background(), s.project.ID, "main")
	if err != nil {
		t.Fatal(err)
	}
	return b.CommitSHA
}

func (s deploySetup) idle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.fake.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// merged builds a MERGED operation through the engine's one transition
// function, with merge commit sha and MR iid.
func (s deploySetup) merged(t *testing.T, subject string, iid int64, sha string) store.Operation {
	t.Helper()
	op := walk(t, s.setup, submit(t, s.setup, subject), rules.ApprovalSent, rules.CreateStarted, rules.CreateMROpened,
		rules.CreateSucceeded, rules.HandleStarted, rules.HandleApproved)
	op, err := s.engine.Transition(context.Background(), op, rules.HandleMerged, flows.TransitionOpts{Source: "test",
		Update: func(o *store.Operation) {
			o.ProjectID, o.TargetBranch, o.MRIID, o.MergeCommitSHA = s.project.ID, "main", iid, sha
		}})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// age moves an operation's last change into the past.
func (s deploySetup) age(t *testing.T, op store.Operation, d time.Duration) {
	t.Helper()
	if _, err := s.sc.Pool.Exec(context.Background(), `UPDATE operations SET updated_at = updated_at - make_interval(secs => $2) WHERE id = $1`,
		op.ID, d.Seconds()); err != nil {
		t.Fatal(err)
	}
}

func (s deploySetup) validatedTotal(t *testing.T) (total float64, bySource map[string]float64) {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	bySource = map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "changebot_validated_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" {
					bySource[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
			total += m.GetCounter().GetValue()
		}
	}
	return total, bySource
}

func (s deploySetup) step(t *testing.T, op store.Operation) rules.StepCode {
	t.Helper()
	got, err := s.store.GetOperation(context.Background(), s.store.DB(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	return rules.StepCode(got.Step)
}

func (s deploySetup) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := s.sc.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestValidatedRaceFlipsOnce: the webhook, the deploy callback and the
// reconciler race on 40 MERGED changes on one database: 40 flips, one
// CALLED_BACK event and one commit claim per change, counter 40.
func TestValidatedRaceFlipsOnce(t *testing.T) {
	t.Parallel()
	s := newDeploySetup(t)
	ctx := context.Background()
	const n = 40
	ops := make([]store.Operation, n)
	for i := range ops {
		ops[i] = s.merged(t, fmt.Sprintf("race-%03d", i), int64(i+1), s.push(t))
	}
	s.idle(t)
	rec := flows.NewReconciler(s.later, s.store, flows.ReconcileConfig{})
	var flips atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	errc := make(chan error, 3*n+4)
	for i, op := range ops {
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			jitter()
			ev := platform.HookEvent{Kind: platform.HookPipeline, ProjectID: s.project.ID,
				Pipeline: &platform.PipelineHook{ID: int64(1000 + i), Ref: "main", SHA: op.MergeCommitSHA, Status: platform.PipelineSuccess, Source: "push"}}
			if _, err := s.engine.ApplyHook(ctx, int64(i+1), ev); err != nil {
				errc <- fmt.Errorf("webhook: %w", err)
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			jitter()
			res, err := s.engine.AcceptDeploy(ctx, rules.DeployCallback{RequestID: fmt.Sprintf("deploy-%d", i),
				ProjectID: s.project.ID, MRIID: op.MRIID, Status: "success"})
			if err != nil {
				errc <- fmt.Errorf("callback: %w", err)
			}
			if res == rules.ResultAccepted {
				flips.Add(1)
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rep, err := rec.Run(ctx)
			if err != nil {
				errc <- fmt.Errorf("reconciler: %w", err)
			}
			t.Logf("reconciler pass: %+v", rep)
		}()
	}
	close(start)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if got := s.count(t, `SELECT count(*) FROM operations WHERE status = 'VALIDATED'`); got != n {
		t.Fatalf("%d changes VALIDATED, want %d", got, n)
	}
	if got := s.count(t, `SELECT count(*) FROM change_events WHERE to_step = $1 AND from_step <> to_step`, int(rules.CalledBack)); got != n {
		t.Errorf("%d CALLED_BACK events, want %d", got, n)
	}
	if got := s.count(t, `SELECT count(*) FROM commit_claims WHERE step = 'CALLED_BACK'`); got != n {
		t.Errorf("%d validated commit claims, want %d", got, n)
	}
	total, by := s.validatedTotal(t)
	if total != n {
		t.Errorf("changebot_validated_total = %v (%v), want %d", total, by, n)
	}
	t.Logf("flips by source: %v (callback answered ACCEPTED %d times)", by, flips.Load())
	for _, op := range ops {
		events, err := s.store.ListEvents(ctx, s.store.DB(), op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if seq, err := store.VerifyChain(events); err != nil {
			t.Fatalf("%s: chain broken at %d: %v", op.ID, seq, err)
		}
	}
}

// jitter spreads the racers so that each source wins some flips: each
// yields the processor a random number of times before it starts (no sleep).
func jitter() {
	for range rand.IntN(200) {
		runtime.Gosched()
	}
}

// TestBranchPipelineAtLaterCommitValidates: the merge commit's own deploy
// pipeline was cancelled, a later commit's succeeded; the webhook of the
// later one (merge_base says it contains the merge) flips the change.
func TestBranchPipelineAtLaterCommitValidates(t *testing.T) {
	t.Parallel()
	s := newDeploySetup(t)
	ctx := context.Background()
	s.fake.SetPipelineScript(s.project.ID, gitlabfake.PipelineScript{Deploy: []string{"canceled", "success"}})
	op := s.merged(t, "later", 1, s.push(t))
	later := s.push(t)
	s.idle(t)
	ev := platform.HookEvent{Kind: platform.HookPipeline, ProjectID: s.project.ID,
		Pipeline: &platform.PipelineHook{ID: 99, Ref: "main", SHA: later, Status: platform.PipelineSuccess, Source: "push"}}
	out, err := s.engine.ApplyHook(ctx, 1, ev)
	if err != nil || out != flows.OutcomeApplied {
		t.Fatalf("ApplyHook = %q, %v", out, err)
	}
	if st := s.step(t, op); st != rules.CalledBack {
		t.Fatalf("step %s, want CALLED_BACK", st)
	}
	// A pipeline at a commit that does not contain the merge changes nothing.
	s2 := s.merged(t, "unrelated", 2, s.push(t))
	ev.Pipeline.SHA = later
	if out, err := s.engine.ApplyHook(ctx, 2, ev); err != nil || out != flows.OutcomeUnrelated {
		t.Fatalf("ApplyHook of an older commit = %q, %v", out, err)
	}
	if st := s.step(t, s2); st != rules.HandleMerged {
		t.Fatalf("step %s, want HANDLE_MERGED", st)
	}
}

// countingStore counts the reconciler's and the sweeper's queries; before
// runs between reading and returning the stuck operations (a state change
// the sweeper must not overwrite).
type countingStore struct {
	*postgres.Store
	queries atomic.Int64
	before  func(ops []store.Operation)
}

func (c *countingStore) ListReconcileCandidates(ctx context.Context, db store.DBTX, p store.ReconcileParams) ([]store.ReconcileCandidate, error) {
	c.queries.Add(1)
	return c.Store.ListReconcileCandidates(ctx, db, p)
}

func (c *countingStore) WakeStaleWaits(ctx context.Context, db store.DBTX, p store.WakeParams) (int, error) {
	c.queries.Add(1)
	return c.Store.WakeStaleWaits(ctx, db, p)
}

func (c *countingStore) ListWatchedMRs(ctx context.Context, db store.DBTX, p store.WatchParams) ([]store.Operation, error) {
	c.queries.Add(1)
	return c.Store.ListWatchedMRs(ctx, db, p)
}

func (c *countingStore) ListStuckOperations(ctx context.Context, db store.DBTX, p store.StuckParams) ([]store.Operation, error) {
	c.queries.Add(1)
	ops, err := c.Store.ListStuckOperations(ctx, db, p)
	if c.before != nil {
		c.before(ops)
	}
	return ops, err
}

// TestReconcilerBoundedWork: a pass costs three queries (candidates, quiet
// waits, watched MRs) and one pipelines
// list per (project, branch), whether 1 or 20 changes wait, and at most
// MaxAncestryChecks merge_base calls.
func TestReconcilerBoundedWork(t *testing.T) {
	t.Parallel()
	for _, rows := range []int{1, 20} {
		t.Run(fmt.Sprintf("%d rows exact", rows), func(t *testing.T) {
			t.Parallel()
			s := newDeploySetup(t)
			for i := range rows {
				s.merged(t, fmt.Sprintf("b%03d", i), int64(i+1), s.push(t))
			}
			s.idle(t)
			cs := &countingStore{Store: s.store}
			rep, err := flows.NewReconciler(s.later, cs, flows.ReconcileConfig{}).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			lists := s.fake.CallCount("GET", "/api/v4/projects/*/pipelines")
			bases := s.fake.CallCount("GET", "/api/v4/projects/*/repository/merge_base")
			t.Logf("report %+v; queries %d, pipeline lists %d, merge_base %d", rep, cs.queries.Load(), lists, bases)
			if rep.Flipped["exact"] != rows || cs.queries.Load() != 3 || lists != 1 || bases != 0 {
				t.Fatalf("flipped %v, queries %d, lists %d, merge_base %d; want %d, 3, 1, 0", rep.Flipped, cs.queries.Load(), lists, bases, rows)
			}
		})
	}
	t.Run("20 rows by ancestry, budget 5", func(t *testing.T) {
		t.Parallel()
		const rows, budget = 20, 5
		s := newDeploySetup(t)
		script := make([]string, rows+1)
		for i := range script {
			script[i] = "canceled"
		}
		script[rows] = "success"
		s.fake.SetPipelineScript(s.project.ID, gitlabfake.PipelineScript{Deploy: script})
		for i := range rows {
			s.merged(t, fmt.Sprintf("c%03d", i), int64(i+1), s.push(t))
		}
		s.push(t) // the one successful pipeline, at a commit containing every merge
		s.idle(t)
		cs := &countingStore{Store: s.store}
		rec := flows.NewReconciler(s.later, cs, flows.ReconcileConfig{MaxAncestryChecks: budget})
		passes := rows / budget
		for pass := 1; pass <= passes; pass++ {
			rep, err := rec.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if rep.AncestryChecks != budget || rep.Flipped["contains"] != budget || rep.PipelineLists != 1 {
				t.Fatalf("pass %d: %+v, want %d checks, %d flips, 1 list", pass, rep, budget, budget)
			}
		}
		if bases := s.fake.CallCount("GET", "/api/v4/projects/*/repository/merge_base"); bases != rows {
			t.Fatalf("merge_base calls %d, want %d", bases, rows)
		}
		if got := cs.queries.Load(); got != int64(3*passes) {
			t.Fatalf("queries %d over %d passes, want %d", got, passes, 3*passes)
		}
	})
}

// TestReconcilerWindowAndWatermark: only MERGED rows last changed inside
// (now - 24h, now - 10m) are looked at; without a deploy pipeline, the
// watermark rule flips MRs up to the highest called-back iid of the project.
func TestReconcilerWindowAndWatermark(t *testing.T) {
	t.Parallel()
	s := newDeploySetup(t)
	ctx := context.Background()
	s.fake.SetPipelineScript(s.project.ID, gitlabfake.PipelineScript{Deploy: []string{"canceled"}})
	young := s.merged(t, "young", 1, s.push(t))
	old := s.merged(t, "old", 2, s.push(t))
	inside := s.merged(t, "inside", 3, s.push(t))
	called := s.merged(t, "called", 5, s.push(t))
	above := s.merged(t, "above", 9, s.push(t))
	s.idle(t)
	s.age(t, old, 48*time.Hour)
	s.age(t, inside, time.Hour)
	s.age(t, above, time.Hour)
	if res, err := s.engine.AcceptDeploy(ctx, rules.DeployCallback{RequestID: "d-5", ProjectID: s.project.ID, MRIID: 5, Status: "success"}); err != nil || res != rules.ResultAccepted {
		t.Fatalf("callback: %s %v", res, err)
	}
	before := map[string]store.Operation{}
	for _, op := range []store.Operation{young, old, above} {
		before[op.ID], _ = s.store.GetOperation(ctx, s.store.DB(), op.ID)
	}
	rep, err := flows.NewReconciler(s.engine, s.store, flows.ReconcileConfig{}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Flipped["watermark"] != 1 || rep.Candidates != 2 {
		t.Fatalf("report %+v, want 2 candidates (inside, above) and 1 watermark flip", rep)
	}
	if st := s.step(t, inside); st != rules.CalledBack {
		t.Fatalf("inside: %s", st)
	}
	for _, op := range []store.Operation{young, old, above} {
		after, _ := s.store.GetOperation(ctx, s.store.DB(), op.ID)
		if after.Step != before[op.ID].Step || after.Version != before[op.ID].Version {
			t.Errorf("%s changed: %s v%d -> %s v%d", op.SubjectID, rules.StepCode(before[op.ID].Step), before[op.ID].Version,
				rules.StepCode(after.Step), after.Version)
		}
	}
	if st := s.step(t, called); st != rules.CalledBack {
		t.Fatalf("called: %s", st)
	}
}

// TestSweeperRequeuesStuckStep: an in-progress operation with no live job
// past the deadline gets its step's job again, with a sweeper event; one
// with a live job, or one that changed after the sweeper read it, is left
// alone.
func TestSweeperRequeuesStuckStep(t *testing.T) {
	t.Parallel()
	s := newDeploySetup(t)
	ctx := context.Background()
	stuck := walk(t, s.setup, submit(t, s.setup, "stuck"), rules.ApprovalSent, rules.CreateStarted, rules.CreateMROpened,
		rules.CreateSucceeded, rules.HandleStarted)
	live := walk(t, s.setup, submit(t, s.setup, "live"), rules.ApprovalSent, rules.CreateStarted, rules.CreateMROpened,
		rules.CreateSucceeded, rules.HandleStarted)
	moved := walk(t, s.setup, submit(t, s.setup, "moved"), rules.ApprovalSent, rules.CreateStarted)
	waiting := walk(t, s.setup, submit(t, s.setup, "waiting"), rules.ApprovalSent) // no job by design
	for _, op := range []store.Operation{stuck, moved} {
		if _, err := s.sc.Pool.Exec(ctx, `DELETE FROM river_job WHERE args->>'operation_id' = $1`, op.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range []store.Operation{stuck, live, moved, waiting} {
		s.age(t, op, time.Hour)
	}
	cs := &countingStore{Store: s.store, before: func(ops []store.Operation) {
		for _, op := range ops {
			if op.ID == moved.ID { // a person cancels it after the sweeper read it
				if _, err := s.engine.Transition(ctx, op, rules.Closed, flows.TransitionOpts{Source: "test"}); err != nil {
					t.Error(err)
				}
			}
		}
	}}
	rep, err := flows.NewSweeper(s.engine, cs, flows.SweepConfig{}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stuck != 2 || rep.Requeued != 1 || rep.Superseded != 1 || cs.queries.Load() != 1 {
		t.Fatalf("report %+v after %d queries; want 2 stuck, 1 requeued, 1 superseded, 1 query", rep, cs.queries.Load())
	}
	if n := s.count(t, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'operation_id' = $2 AND state IN ('available', 'scheduled')`,
		rules.KindHandle, stuck.ID); n != 1 {
		t.Fatalf("%d handle jobs for the stuck operation, want 1", n)
	}
	events, _ := s.store.ListEvents(ctx, s.store.DB(), stuck.ID)
	last := events[len(events)-1]
	if last.Actor != flows.ActorSweeper || last.ToStep != int(rules.HandleStarted) {
		t.Fatalf("last event %+v, want a sweeper event at HANDLE_STARTED", last)
	}
	if _, err := store.VerifyChain(events); err != nil {
		t.Fatal(err)
	}
	if st := s.step(t, moved); st != rules.Closed {
		t.Fatalf("the sweeper wrote over a newer state: %s", st)
	}
	for _, op := range []store.Operation{live, waiting} {
		if n := s.count(t, `SELECT count(*) FROM change_events WHERE operation_id = $1 AND actor = 'sweeper'`, op.ID); n != 0 {
			t.Errorf("%s was swept", op.SubjectID)
		}
	}
	// The next pass finds nothing: the job is live again.
	if rep, err := flows.NewSweeper(s.engine, s.store, flows.SweepConfig{}).Run(ctx); err != nil || rep.Stuck != 0 {
		t.Fatalf("second pass: %+v %v", rep, err)
	}
}

// TestStaleWriterLoses (fencing): two engines on one database. A slow
// replica that read the operation before another one moved it cannot
// complete its transition; one that holds the row lock makes the other
// wait and then lose. Nothing the loser meant to write is written.
func TestStaleWriterLoses(t *testing.T) {
	t.Parallel()
	s := newDeploySetup(t)
	ctx := context.Background()
	slow, fast := s.engine, s.later
	op := walk(t, s.setup, submit(t, s.setup, "fence"), rules.ApprovalSent, rules.CreateStarted, rules.CreateMROpened,
		rules.CreateSucceeded, rules.HandleStarted, rules.HandleApproved)

	// 1. Stale read: fast takes the change back to HANDLE_STARTED and on to
	// HANDLE_APPROVED again (same step, newer version); slow, still holding
	// its old copy, tries to record the merge.
	cur, err := fast.Transition(ctx, op, rules.HandleStarted, flows.TransitionOpts{Source: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	if cur, err = fast.Transition(ctx, cur, rules.HandleApproved, flows.TransitionOpts{Source: "fast"}); err != nil {
		t.Fatal(err)
	}
	before := snap(t, s.setup, op)
	_, err = slow.Transition(ctx, op, rules.HandleMerged, flows.TransitionOpts{Source: "slow",
		Update: func(o *store.Operation) { o.MergeCommitSHA = "stale" }})
	if !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("stale writer: %v, want ErrVersionConflict", err)
	}
	if after := snap(t, s.setup, op); after.Op.Version != before.Op.Version || after.Events != before.Events || after.Op.MergeCommitSHA != "" {
		t.Fatalf("the stale writer wrote: %+v", after.Op)
	}

	// 2. Lock held: slow is inside its transaction (rows locked) when fast
	// tries to move the same version; fast waits, slow commits, fast loses.
	inGuard, release := make(chan int, 1), make(chan struct{}) // inGuard: the lock holder's backend pid
	slowDone := make(chan error, 1)
	go func() {
		_, err := slow.Transition(ctx, cur, rules.HandleMerged, flows.TransitionOpts{Source: "slow",
			Update: func(o *store.Operation) { o.MergeCommitSHA = "slow-merge" },
			Guard: func(ctx context.Context, tx store.Tx, _ store.Operation, _ store.Binding) error {
				ptx, _ := postgres.PgxTx(tx)
				var pid int
				if err := ptx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
					return err
				}
				inGuard <- pid
				<-release
				return nil
			}})
		slowDone <- err
	}()
	holder := <-inGuard
	fastDone := make(chan error, 1)
	go func() {
		_, err := fast.Transition(ctx, cur, rules.Closed, flows.TransitionOpts{Source: "fast"})
		fastDone <- err
	}()
	pgtest.WaitBlockedBy(t, s.sc.Pool, holder, fastDone)
	close(release)
	if err := <-slowDone; err != nil {
		t.Fatalf("lock holder: %v", err)
	}
	if err := <-fastDone; !errors.Is(err, store.ErrStepMismatch) {
		t.Fatalf("waiting writer: %v, want ErrStepMismatch", err)
	}
	got, _ := s.store.GetOperation(ctx, s.store.DB(), op.ID)
	if rules.StepCode(got.Step) != rules.HandleMerged || got.MergeCommitSHA != "slow-merge" {
		t.Fatalf("final state %s %q", rules.StepCode(got.Step), got.MergeCommitSHA)
	}
}
