package postgres_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"changebot/store"
)

// TestCountByStatusWithAge: one row per asked status in order, zero
// included, with the oldest last change of each.
func TestCountByStatusWithAge(t *testing.T) {
	t.Parallel()
	s, sc := setup(t)
	ctx := context.Background()
	base := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	rows := []struct {
		status string
		ago    time.Duration
	}{
		{store.StatusApprovalSent, time.Hour}, {store.StatusApprovalSent, 3 * time.Hour},
		{store.StatusMerging, 10 * time.Minute}, {store.StatusValidated, 48 * time.Hour},
	}
	for i, r := range rows {
		op := create(t, s, newOp(fmt.Sprintf("op_%d", i), fmt.Sprintf("svc-%d", i)))
		if _, err := sc.Pool.Exec(ctx, `UPDATE operations SET status = $2, updated_at = $3 WHERE id = $1`,
			op.ID, r.status, base.Add(-r.ago)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.CountByStatusWithAge(ctx, s.DB(), []string{store.StatusMerging, store.StatusApprovalSent, store.StatusCreateFailed})
	if err != nil {
		t.Fatal(err)
	}
	want := []store.StatusAge{
		{Status: store.StatusMerging, Count: 1, OldestUpdatedAt: base.Add(-10 * time.Minute)},
		{Status: store.StatusApprovalSent, Count: 2, OldestUpdatedAt: base.Add(-3 * time.Hour)},
		{Status: store.StatusCreateFailed},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if n, err := s.CountActive(ctx, s.DB()); err != nil || n != 3 {
		t.Fatalf("CountActive = %d %v, want 3 (the VALIDATED change holds nothing)", n, err)
	}
	for _, st := range store.ActiveStatuses() {
		if store.IsReappliable(st) {
			t.Errorf("active status %s is reappliable", st)
		}
	}
}

// TestIsJobLeader reads River's leader row.
func TestIsJobLeader(t *testing.T) {
	t.Parallel()
	s, sc := setup(t)
	ctx := context.Background()
	if ok, err := s.IsJobLeader(ctx, s.DB(), "replica-a"); err != nil || ok {
		t.Fatalf("no leader elected: %v %v", ok, err)
	}
	if _, err := sc.Pool.Exec(ctx, `INSERT INTO river_leader (leader_id, elected_at, expires_at)
		VALUES ('replica-a', now(), now() + interval '10 seconds')`); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"replica-a": true, "replica-b": false} {
		if ok, err := s.IsJobLeader(ctx, s.DB(), id); err != nil || ok != want {
			t.Errorf("IsJobLeader(%s) = %v %v, want %v", id, ok, err, want)
		}
	}
	if _, err := sc.Pool.Exec(ctx, `UPDATE river_leader SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.IsJobLeader(ctx, s.DB(), "replica-a"); err != nil || ok {
		t.Fatalf("expired leadership: %v %v", ok, err)
	}
}
