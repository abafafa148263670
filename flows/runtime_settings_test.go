package flows_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/settings"
)

// livePoll is a polling schedule an operator changes while changes run,
// served through EngineConfig.PollFunc as the runtime settings are.
type livePoll struct {
	mu sync.Mutex
	p  flows.PollConfig
}

func (l *livePoll) get(string) flows.PollConfig {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p
}

func (l *livePoll) set(f func(p *flows.PollConfig)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(&l.p)
}

func liveHarness(t *testing.T) (*flowtest.Harness, *livePoll) {
	t.Helper()
	live := &livePoll{p: flowtest.Poll}
	h := flowtest.New(t, &flowtest.Opts{Configure: func(cfg *flows.EngineConfig) { cfg.PollFunc = live.get }})
	return h, live
}

// TestPollSettingsApplyWithoutRestart (issue 9, defect 11): deploy.deadline
// and note.delay changed while a change runs apply to it at its next step.
func TestPollSettingsApplyWithoutRestart(t *testing.T) {
	t.Parallel()
	t.Run("deploy.deadline", func(t *testing.T) {
		t.Parallel()
		h, live := liveHarness(t)
		h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{Deploy: []string{"failed"}})
		op := h.ToMerged(t, flowtest.Change("svc"))
		live.set(func(p *flows.PollConfig) { p.DeployDeadline = 30 * time.Minute })
		h.TakeWebhooks(t)
		h.RunFor(t, 45*time.Minute)
		h.RequireStep(t, op.ID, rules.DeployPending)
	})
	t.Run("note.delay", func(t *testing.T) {
		t.Parallel()
		h, live := liveHarness(t)
		op := h.ToMROpened(t, flowtest.Change("svc"))
		h.RunFor(t, flowtest.Poll.NoteDelay)
		before := map[int64]bool{} // refreshes (backstops) asked before the setting changed
		for _, j := range h.Jobs(t, rules.KindRefreshNote) {
			before[j.ID] = true
		}
		live.set(func(p *flows.PollConfig) { p.NoteDelay = time.Minute })
		h.DeliverWebhooks(t) // the pipeline passes: the change moves on
		h.WorkUntilIdle(t)
		jobs := h.Jobs(t, rules.KindRefreshNote)
		if len(jobs) == 0 {
			t.Fatal("no status note refresh after the change moved")
		}
		for _, j := range jobs {
			if !before[j.ID] && j.State != "completed" && j.ScheduledAt.Before(h.Now().Add(time.Minute)) {
				t.Fatalf("refresh of %s scheduled at %s, want note.delay (1m) after %s", op.ID, j.ScheduledAt, h.Now())
			}
		}
	})
}

// TestFlowDefaultsAreTheRegistrys (issue 9, defect 11): the settings
// registry is the one source of defaults; the flow's own defaults equal it.
func TestFlowDefaultsAreTheRegistrys(t *testing.T) {
	t.Parallel()
	dur := func(key string) time.Duration {
		d, ok := settings.Lookup(key)
		if !ok {
			t.Fatalf("no setting %s", key)
		}
		v, err := d.ParseText(d.Default)
		if err != nil {
			t.Fatal(err)
		}
		return v.Duration()
	}
	num := func(key string) int {
		d, _ := settings.Lookup(key)
		v, err := d.ParseText(d.Default)
		if err != nil {
			t.Fatal(err)
		}
		return v.Int()
	}
	p, r, s := flows.DefaultPollConfig, flows.DefaultReconcileConfig, flows.DefaultSweepConfig
	tests := []struct {
		key       string
		got, want any
	}{
		{settings.PollShortInterval, p.ShortInterval, dur(settings.PollShortInterval)},
		{settings.PollShortCount, p.ShortCount, num(settings.PollShortCount)},
		{settings.PollLongInterval, p.LongInterval, dur(settings.PollLongInterval)},
		{settings.PipelineDeadline, p.PipelineDeadline, dur(settings.PipelineDeadline)},
		{settings.RebaseDeadline, p.RebaseDeadline, dur(settings.RebaseDeadline)},
		{settings.DeployDeadline, p.DeployDeadline, dur(settings.DeployDeadline)},
		{settings.NoteDelay, p.NoteDelay, dur(settings.NoteDelay)},
		{settings.MergeMaxRounds, p.MaxRounds, num(settings.MergeMaxRounds)},
		{settings.ApproveMaxRetries, p.ApproveMaxRetries, num(settings.ApproveMaxRetries)},
		{settings.ApproveMaxRetries + " (zero value)", flows.DefaultApproveMaxRetries, num(settings.ApproveMaxRetries)},
		{settings.ReconcileInterval, r.Interval, dur(settings.ReconcileInterval)},
		{settings.ReconcileMinAge, r.MinAge, dur(settings.ReconcileMinAge)},
		{settings.ReconcileMaxAge, r.MaxAge, dur(settings.ReconcileMaxAge)},
		{settings.ReconcileQuietAfter, r.QuietAfter, dur(settings.ReconcileQuietAfter)},
		{settings.SweeperInterval, s.Interval, dur(settings.SweeperInterval)},
		{settings.SweeperAfter, s.After, dur(settings.SweeperAfter)},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: flows default %v, registry default %v", tt.key, tt.got, tt.want)
		}
	}
}

// TestPeriodicSettingsApplyWithoutRestart (issue 9, defect 11): the
// reconciler reads reconcile.min_age (and max_age, quiet_after) and the
// sweeper sweeper.after at every pass, not once at start.
func TestPeriodicSettingsApplyWithoutRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("reconcile.min_age", func(t *testing.T) {
		t.Parallel()
		get, set := liveDuration(time.Hour)
		h := flowtest.New(t, nil)
		h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{Deploy: []string{"failed"}})
		h.ToMerged(t, flowtest.Change("svc"))
		h.Advance(30 * time.Minute) // merged 30 minutes ago, deploy lost
		rec := flows.NewReconciler(h.Engine, h.Store, flows.ReconcileConfig{
			LiveFunc: func() flows.ReconcileConfig { return flows.ReconcileConfig{MinAge: get()} }})
		set(time.Hour)
		if rep, err := rec.Run(ctx); err != nil || rep.Candidates != 0 {
			t.Fatalf("min_age 1h: %+v %v, want no candidate", rep, err)
		}
		set(20 * time.Minute)
		if rep, err := rec.Run(ctx); err != nil || rep.Candidates != 1 {
			t.Fatalf("min_age changed to 20m: %+v %v, want the merged change as candidate", rep, err)
		}
	})
	t.Run("sweeper.after", func(t *testing.T) {
		t.Parallel()
		get, set := liveDuration(time.Hour)
		h := flowtest.New(t, nil)
		h.RequirePostgres(t, "deletes river_job rows through the PostgreSQL pool (h.Schema.Pool)")
		op := h.Submit(t, flowtest.Change("svc"))
		if _, err := h.Schema.Pool.Exec(ctx, `DELETE FROM river_job`); err != nil { // the job is lost
			t.Fatal(err)
		}
		h.Advance(30 * time.Minute)
		sw := flows.NewSweeper(h.Engine, h.Store, flows.SweepConfig{AfterFunc: get})
		set(time.Hour)
		if rep, err := sw.Run(ctx); err != nil || rep.Stuck != 0 {
			t.Fatalf("after 1h: %+v %v, want nothing stuck yet", rep, err)
		}
		set(20 * time.Minute)
		if rep, err := sw.Run(ctx); err != nil || rep.Requeued != 1 {
			t.Fatalf("after changed to 20m: %+v %v, want %s requeued", rep, err, op.ID)
		}
	})
}

// liveDuration is a duration setting an operator changes while the bot
// runs: get reads it as a pass would, set changes it.
func liveDuration(d time.Duration) (get func() time.Duration, set func(time.Duration)) {
	var mu sync.Mutex
	return func() time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return d
		}, func(v time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			d = v
		}
}
