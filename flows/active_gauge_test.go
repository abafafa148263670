package flows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"changebot/flows"
	"changebot/store"
)

// TestActiveGaugeOnTheLeaderOnly (issue 9, defect 12): the leader exports
// every active status (zero included) with the age of its oldest change;
// a replica that is not the leader exports nothing.
func TestActiveGaugeOnTheLeaderOnly(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i, r := range []struct {
		status string
		ago    time.Duration
	}{{store.StatusApprovalSent, time.Hour}, {store.StatusApprovalSent, 2 * time.Hour}, {store.StatusValidated, 90 * time.Hour}} {
		op := submit(t, s, fmt.Sprintf("svc-%d", i))
		if _, err := s.sc.Pool.Exec(ctx, `UPDATE operations SET status = $2, updated_at = $3 WHERE id = $1`, op.ID, r.status, now.Add(-r.ago)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.sc.Pool.Exec(ctx, `INSERT INTO river_leader (leader_id, elected_at, expires_at) VALUES ('leader', now(), now() + interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := flows.NewMetrics(reg)
	gauge := func(id string) *flows.ActiveGauge {
		return flows.NewActiveGauge(flows.ActiveGaugeConfig{Store: s.store, DB: s.store.DB(), Metrics: m,
			ClientIDFunc: func() string { return id }, NowFunc: func() time.Time { return now }})
	}
	if err := gauge("leader").Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got := gaugeValues(t, reg)
	want := map[string]float64{
		"changebot_active_changes/APPROVAL_SENT": 2, "changebot_active_changes_oldest_seconds/APPROVAL_SENT": 7200,
		"changebot_active_changes/MERGING": 0, "changebot_active_changes_oldest_seconds/MERGING": 0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (exported %v), want %v", k, g, ok, v)
		}
	}
	if len(got) != 2*len(store.ActiveStatuses()) {
		t.Errorf("exported %d series, want 2 per active status (%d): %v", len(got), len(store.ActiveStatuses()), got)
	}
	if _, ok := got["changebot_active_changes/VALIDATED"]; ok {
		t.Errorf("a finished status is exported: %v", got)
	}
	if err := gauge("follower").Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := gaugeValues(t, reg); len(got) != 0 {
		t.Fatalf("a replica that is not the leader exports %v", got)
	}
}

// gaugeValues returns the active changes gauges as "name/status" -> value.
func gaugeValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "changebot_active_changes" && mf.GetName() != "changebot_active_changes_oldest_seconds" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			out[mf.GetName()+"/"+mt.GetLabel()[0].GetValue()] = mt.GetGauge().GetValue()
		}
	}
	return out
}
