package settings

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// newReplica returns a cache over its own pool on sc's schema, as another
// replica would have.
func newReplica(t *testing.T, sc pgtest.Schema, initial map[string]string, ttl time.Duration) (*Cache, *postgres.Store) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), sc.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := postgres.New(pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCache(CacheConfig{Store: st, Initial: initial, TTL: ttl,
		Logger: slog.New(slog.NewTextHandler(tlogWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return c, st
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := pgtest.New(t)
	c, st := newReplica(t, sc, map[string]string{PollShortCount: "5", PipelineDeadline: "1h"}, 0)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A row stored in another case (before scopes were lower-cased).
	_, err := st.SaveSetting(ctx, store.SaveSettingParams{Key: PollShortCount, Scope: "project:Old/Case", Value: json.RawMessage(`4`), UpdatedBy: "bob"})
	must(err)
	must(c.Load(ctx))
	must(c.Set(ctx, PollShortCount, "", json.RawMessage(`6`), "alice"))
	must(c.Set(ctx, PollShortCount, "group/repo", json.RawMessage(`7`), "bob"))
	must(c.Set(ctx, PollShortCount, "Group/Mixed", json.RawMessage(`9`), "bob"))

	tests := []struct {
		name, key, project string
		want               int
		source, scope      string
	}{
		{"project by path", PollShortCount, "group/repo", 7, SourceStored, "project:group/repo"},
		{"project by path in another case", PollShortCount, "GROUP/Repo", 7, SourceStored, "project:group/repo"},
		{"project set in another case", PollShortCount, "group/mixed", 9, SourceStored, "project:group/mixed"},
		{"project stored in another case", PollShortCount, "old/case", 4, SourceStored, "project:Old/Case"},
		{"other project falls to global", PollShortCount, "other/repo", 6, SourceStored, "global"},
		{"global", PollShortCount, "", 6, SourceStored, "global"},
		{"config", PipelineDeadline, "group/repo", int(time.Hour), SourceConfig, "global"},
		{"default", MergeMaxRounds, "group/repo", 3, SourceDefault, "global"},
	}
	for _, tt := range tests {
		v := c.Get(tt.key, tt.project)
		got := v.Int()
		if v.Kind == KindDuration {
			got = int(v.Duration())
		}
		if got != tt.want || v.Source != tt.source || v.Scope != tt.scope {
			t.Errorf("%s: Get(%s, %q) = %v from %s/%s, want %v from %s/%s", tt.name, tt.key, tt.project, got, v.Source, v.Scope, tt.want, tt.source, tt.scope)
		}
	}
	if v := c.Get(PollShortCount, "group/repo"); v.UpdatedBy != "bob" || v.UpdatedAt.IsZero() {
		t.Errorf("stored value lacks who and when: %+v", v)
	}

	// null removes a scope's value: the project falls back to global.
	must(c.Set(ctx, PollShortCount, "group/repo", json.RawMessage(`null`), "bob"))
	if v := c.Get(PollShortCount, "group/repo"); v.Int() != 6 || v.Scope != "global" {
		t.Errorf("after removing the project value: %+v", v)
	}
	if got := len(c.List("group/repo")); got != len(Defs()) {
		t.Errorf("List has %d values, want %d", got, len(Defs()))
	}
}

func TestSetRefusesAndAudits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := pgtest.New(t)
	c, st := newReplica(t, sc, nil, 0)
	if err := c.Set(ctx, "no.such.key", "", json.RawMessage(`1`), "alice"); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("unknown key: %v", err)
	}
	if err := c.Set(ctx, PollShortInterval, "", json.RawMessage(`"soon"`), "alice"); !errors.Is(err, ErrInvalidValue) {
		t.Errorf("invalid value: %v", err)
	}
	if err := c.Set(ctx, PollShortInterval, "", json.RawMessage(`"30s"`), ""); err == nil {
		t.Error("a change without an author must be refused")
	}
	for by, want := range map[string]string{
		"alice\nbob":    "updated_by contains a control character (U+000A)",
		"alice\t":       "updated_by contains a control character (U+0009)",
		"\x1b[31malice": "updated_by contains a control character (U+001B)",
		"ecila\u202e":   "updated_by contains a bidirectional formatting character (U+202E)",
	} {
		if err := c.Set(ctx, PollShortInterval, "", json.RawMessage(`"30s"`), by); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("updated_by %q: %v, want refused: %q", by, err, want)
		}
	}
	if err := c.Set(ctx, PollShortCount, "", json.RawMessage(`-1`), "alice"); !errors.Is(err, ErrInvalidValue) {
		t.Errorf("negative count: %v", err)
	}
	if err := c.Set(ctx, AdmissionMaxActive, "group/repo", json.RawMessage(`5`), "alice"); !errors.Is(err, ErrGlobalOnly) {
		t.Errorf("global-only key with a project: %v", err)
	}
	if rows, _ := st.ListSettings(ctx, st.DB()); len(rows) != 0 {
		t.Fatalf("refused changes stored %v", rows)
	}

	for _, raw := range []string{`"30s"`, `"45s"`, `null`} {
		if err := c.Set(ctx, PollShortInterval, "", json.RawMessage(raw), "alice"); err != nil {
			t.Fatal(err)
		}
	}
	audit, err := st.ListSettingAudit(ctx, st.DB(), PollShortInterval, "global")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"", `"30s"`}, {`"30s"`, `"45s"`}, {`"45s"`, ""}}
	if len(audit) != len(want) {
		t.Fatalf("audit rows %+v, want %d", audit, len(want))
	}
	for i, a := range audit {
		if string(a.OldValue) != want[i][0] || string(a.NewValue) != want[i][1] || a.UpdatedBy != "alice" || a.UpdatedAt.IsZero() {
			t.Errorf("audit row %d = old %s new %s by %s, want old %s new %s", i, a.OldValue, a.NewValue, a.UpdatedBy, want[i][0], want[i][1])
		}
	}
}

// TestGlobalOnlyIgnoresProjectRows: a project value of a global-only key
// stored before the key was marked (written here straight to the store) is
// never what a lookup for that project answers, and it can be removed.
func TestGlobalOnlyIgnoresProjectRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := pgtest.New(t)
	c, st := newReplica(t, sc, nil, 0)
	if _, err := st.SaveSetting(ctx, store.SaveSettingParams{Key: AdmissionMaxActive, Scope: "project:group/repo",
		Value: json.RawMessage(`5`), UpdatedBy: "before"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, AdmissionMaxActive, "", json.RawMessage(`50`), "alice"); err != nil {
		t.Fatal(err)
	}
	if v := c.Get(AdmissionMaxActive, "group/repo"); v.Int() != 50 || v.Scope != "global" {
		t.Errorf("Get(admission.max_active, group/repo) = %d from %s, want the global 50", v.Int(), v.Scope)
	}
	if err := c.Set(ctx, AdmissionMaxActive, "group/repo", json.RawMessage(`null`), "alice"); err != nil {
		t.Fatalf("removing the old project value: %v", err)
	}
	if rows, _ := st.ListSettings(ctx, st.DB()); len(rows) != 1 || rows[0].Scope != "global" {
		t.Errorf("stored %+v, want the global row only", rows)
	}
}

// waitFor polls get until it returns true, up to limit, and returns how
// long that took (limit+ when it never did).
func waitFor(limit time.Duration, get func() bool) time.Duration {
	start := time.Now()
	for time.Since(start) < limit {
		if get() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start) + time.Nanosecond
}

// TestTwoReplicasSeeAChangeWithin5s runs two caches on one schema, as two
// replicas: a Set on one is seen by the other within 5 s (by NOTIFY, in
// practice within milliseconds).
func TestTwoReplicasSeeAChangeWithin5s(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := pgtest.New(t)
	a, _ := newReplica(t, sc, nil, time.Minute) // a long TTL: only the notification can be fast
	b, _ := newReplica(t, sc, nil, time.Minute)
	for _, c := range []*Cache{a, b} {
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
	}
	// Another schema's change on the same database must not disturb b.
	other := pgtest.New(t)
	o, _ := newReplica(t, other, nil, 0)
	if err := o.Set(ctx, FlowApprovalFirst, "", json.RawMessage(`false`), "elsewhere"); err != nil {
		t.Fatal(err)
	}

	for i, want := range []bool{false, true, false} {
		if err := a.Set(ctx, FlowApprovalFirst, "", json.RawMessage(map[bool]string{true: "true", false: "false"}[want]), "alice"); err != nil {
			t.Fatal(err)
		}
		took := waitFor(6*time.Second, func() bool {
			v := b.Get(FlowApprovalFirst, "")
			return v.Source == SourceStored && v.Bool() == want
		})
		t.Logf("change %d seen by the other replica after %s", i, took)
		if took >= 5*time.Second {
			t.Fatalf("change %d not seen by the other replica within 5s (%s)", i, took)
		}
	}
}

// TestTTLReloadWithoutNotify writes a row behind the caches' back (no
// NOTIFY, as if the notification were lost): the TTL bounds the staleness.
func TestTTLReloadWithoutNotify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := pgtest.New(t)
	c, _ := newReplica(t, sc, nil, time.Second)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A positive sign that the listener runs and its catch-up reload has
	// passed: another replica's notified write is seen. Without it a
	// listener that started late would catch the row below up at its start
	// and the test would pass with the TTL reload broken (issue 21.19).
	other, _ := newReplica(t, sc, nil, 0)
	if err := other.Set(ctx, PollShortCount, "", json.RawMessage(`7`), "alice"); err != nil {
		t.Fatal(err)
	}
	if took := waitFor(6*time.Second, func() bool { return c.Get(PollShortCount, "").Int() == 7 }); took >= 6*time.Second {
		t.Fatal("the notified write was not seen: the listener did not start")
	}
	if _, err := sc.Pool.Exec(ctx, `INSERT INTO settings (key, scope, value, updated_by, updated_at)
		VALUES ($1, 'global', '42', 'psql', now())`, AdmissionMaxActive); err != nil {
		t.Fatal(err)
	}
	took := waitFor(6*time.Second, func() bool { return c.Get(AdmissionMaxActive, "").Int() == 42 })
	t.Logf("seen without NOTIFY after %s", took)
	if took >= 2500*time.Millisecond {
		t.Fatalf("a change without notification took %s to be seen with a 1s TTL", took)
	}
}

func TestCloseStopsListener(t *testing.T) {
	t.Parallel()
	sc := pgtest.New(t)
	c, _ := newReplica(t, sc, nil, 0)
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err == nil {
		t.Error("a second Start must be refused")
	}
	cancel()
	done := make(chan struct{})
	go func() { c.Close(); c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the context ended")
	}
}

func TestNewCacheRefusesBadInitialValues(t *testing.T) {
	t.Parallel()
	_, err := NewCache(CacheConfig{Store: &postgres.Store{}, Initial: map[string]string{PollShortInterval: "fast"}})
	if !errors.Is(err, ErrInvalidValue) {
		t.Fatalf("NewCache = %v, want ErrInvalidValue", err)
	}
}

// TestSetChecksRulesBetweenSettings: a write that breaks a rule between two
// settings, with the values in effect after it (stored, config, default), is
// refused naming both settings, the scope and the rule, and stores nothing.
// Each case starts from its own schema with the stored values in before.
func TestSetChecksRulesBetweenSettings(t *testing.T) {
	t.Parallel()
	type write struct{ key, project, raw string }
	tests := []struct {
		name     string
		initial  map[string]string
		before   []write
		set      write
		wantText []string // empty: accepted
	}{
		{"reserve above the default burst", nil, nil, write{GitLabBudgetReserve, "", `300`},
			[]string{"gitlab.budget_reserve (300) must be below gitlab.budget_burst (250) in scope global", "never get a call"}},
		{"reserve equal to the burst", nil, nil, write{GitLabBudgetReserve, "", `250`}, []string{"gitlab.budget_reserve", "gitlab.budget_burst"}},
		{"reserve below the burst", nil, nil, write{GitLabBudgetReserve, "", `249`}, nil},
		{"burst lowered under a stored reserve", nil, []write{{GitLabBudgetReserve, "", `50`}}, write{GitLabBudgetBurst, "", `40`},
			[]string{"gitlab.budget_reserve (50) must be below gitlab.budget_burst (40)"}},
		{"burst lowered under the config reserve", map[string]string{GitLabBudgetReserve: "200"}, nil, write{GitLabBudgetBurst, "", `150`},
			[]string{"gitlab.budget_reserve (200) must be below gitlab.budget_burst (150)"}},
		{"sweeper before the default rescue", nil, nil, write{SweeperAfter, "", `"4m"`},
			[]string{"jobs.rescue_after (5m) must be below sweeper.after (4m)", "runs twice"}},
		{"rescue after the sweeper", nil, nil, write{JobsRescueAfter, "", `"15m"`}, []string{"jobs.rescue_after (15m)", "sweeper.after (10m)"}},
		{"sweeper well after the rescue", nil, nil, write{SweeperAfter, "", `"20m"`}, nil},
		{"min age above the max age", nil, nil, write{ReconcileMinAge, "", `"48h"`},
			[]string{"reconcile.min_age (48h) must be below reconcile.max_age (24h)"}},
		{"max age below a stored min age", nil, []write{{ReconcileMinAge, "", `"2h"`}}, write{ReconcileMaxAge, "", `"90m"`},
			[]string{"reconcile.min_age (2h)", "reconcile.max_age (90m)"}},
		{"long interval shorter than the short one", nil, nil, write{PollLongInterval, "", `"10s"`},
			[]string{"poll.short_interval (15s) must be at most poll.long_interval (10s) in scope global"}},
		{"long interval equal to the short one", nil, nil, write{PollLongInterval, "", `"15s"`}, nil},
		{"project long interval below the global short one", nil, []write{{PollShortInterval, "", `"1m"`}}, write{PollLongInterval, "grp/app", `"30s"`},
			[]string{"poll.short_interval (1m) must be at most poll.long_interval (30s) in scope project:grp/app"}},
		{"global short interval above a project's long one", nil, []write{{PollLongInterval, "grp/app", `"30s"`}}, write{PollShortInterval, "", `"1m"`},
			[]string{"poll.short_interval (1m) must be at most poll.long_interval (30s) in scope project:grp/app"}},
		{"removing a project value that kept the rule", nil, []write{{PollLongInterval, "grp/app", `"5m"`}, {PollShortInterval, "grp/app", `"3m"`}},
			write{PollLongInterval, "grp/app", `null`}, []string{"poll.short_interval (3m) must be at most poll.long_interval (2m) in scope project:grp/app"}},
		{"a project's value does not bind another project", nil, []write{{PollLongInterval, "grp/app", `"30s"`}},
			write{PollShortInterval, "other/app", `"1m"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c, st := newReplica(t, pgtest.New(t), tt.initial, 0)
			for _, w := range tt.before {
				if err := c.Set(ctx, w.key, w.project, json.RawMessage(w.raw), "alice"); err != nil {
					t.Fatalf("before: %v", err)
				}
			}
			rows, _ := st.ListSettings(ctx, st.DB())
			err := c.Set(ctx, tt.set.key, tt.set.project, json.RawMessage(tt.set.raw), "bob")
			if len(tt.wantText) == 0 {
				if err != nil {
					t.Fatalf("Set: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("Set = %v, want ErrConflict", err)
			}
			for _, w := range append(tt.wantText, "setting "+tt.set.key+" refused, nothing stored") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			after, _ := st.ListSettings(ctx, st.DB())
			if len(after) != len(rows) {
				t.Errorf("refused write changed the table: %d rows before, %d after", len(rows), len(after))
			}
		})
	}
}
