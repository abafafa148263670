package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"changebot/store"
)

// ListChangesFiltersAndPages: every filter of ListChanges selects what it
// names, the stuck thresholds apply per step to step_started_at, and
// keyset pages (newest id first) return each change exactly once while
// changes move between pages.
func testListChangesFiltersAndPages(t *testing.T, open Open) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := open(t)(Opts{NowFunc: func() time.Time { return now }})
	ctx := context.Background()
	// op_01..op_09: projects g/a, id 7 (odd), and 42 as the submitter
	// spelled it, id 42 (even), one a minute apart.
	var ops []store.Operation
	for i := 1; i <= 9; i++ {
		op := newOp(fmt.Sprintf("op_%02d", i), fmt.Sprintf("svc%d", i))
		op.Project = map[bool]string{true: "g/a", false: "42"}[i%2 == 1]
		op.ProjectID = map[bool]int64{true: 7, false: 42}[i%2 == 1]
		if i == 5 {
			op.RequestedBy, op.TargetKey = "bob", "stage"
		}
		ops = append(ops, create(t, s, op))
		now = now.Add(time.Minute)
	}
	// op_03 moves to APPROVAL_SENT (10402) at 10:09.
	if _, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: "op_03", ExpectStep: 10401,
		ToStep: 10402, ToStatus: store.StatusApprovalSent, Event: store.EventParams{Type: store.EventTransition}}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	list := func(p store.ListParams) []string {
		t.Helper()
		if p.Limit == 0 {
			p.Limit = 100
		}
		got, err := s.ListChanges(ctx, s.DB(), p)
		if err != nil {
			t.Fatalf("ListChanges(%+v): %v", p, err)
		}
		ids := []string{}
		for _, op := range got {
			ids = append(ids, op.ID)
		}
		return ids
	}
	for _, c := range []struct {
		name string
		p    store.ListParams
		want []string
	}{
		{"all, newest first", store.ListParams{}, []string{"op_09", "op_08", "op_07", "op_06", "op_05", "op_04", "op_03", "op_02", "op_01"}},
		{"status", store.ListParams{Statuses: []string{store.StatusApprovalSent}}, []string{"op_03"}},
		{"step", store.ListParams{Steps: []int{10402, 10105}}, []string{"op_03"}},
		{"project path", store.ListParams{Project: "g/a", Limit: 3}, []string{"op_09", "op_07", "op_05"}},
		{"project id", store.ListParams{Project: "42"}, []string{"op_08", "op_06", "op_04", "op_02"}},
		{"project path in another case", store.ListParams{Project: "G/A", Limit: 2}, []string{"op_09", "op_07"}},
		{"project id of a path-stored project", store.ListParams{Project: "7", Limit: 2}, []string{"op_09", "op_07"}},
		{"subject", store.ListParams{SubjectID: "svc4"}, []string{"op_04"}},
		{"target key", store.ListParams{TargetKey: "stage"}, []string{"op_05"}},
		{"requested by", store.ListParams{RequestedBy: "bob"}, []string{"op_05"}},
		{"updated window", store.ListParams{UpdatedAfter: t0.Add(time.Minute), UpdatedBefore: t0.Add(4 * time.Minute)},
			[]string{"op_04"}},
		{"updated after", store.ListParams{UpdatedAfter: t0.Add(7 * time.Minute)}, []string{"op_09", "op_03"}},
		{"updated before", store.ListParams{UpdatedBefore: t0.Add(2 * time.Minute)}, []string{"op_02", "op_01"}},
		{"all filters", store.ListParams{Statuses: []string{store.StatusApprovalSending}, Project: "g/a", RequestedBy: "bob",
			UpdatedAfter: t0}, []string{"op_05"}},
		// Stuck: at 10401, step started before 10:02 (op_01, op_02); at
		// 10402 before 10:10 (op_03, started 10:09).
		{"stuck", store.ListParams{StuckOnly: true, Stuck: []store.StuckBound{{Step: 10401, StartedBefore: t0.Add(2 * time.Minute)},
			{Step: 10402, StartedBefore: t0.Add(10 * time.Minute)}}}, []string{"op_03", "op_02", "op_01"}},
		{"stuck, no thresholds", store.ListParams{StuckOnly: true}, []string{}},
		{"stuck and project", store.ListParams{StuckOnly: true, Project: "42",
			Stuck: []store.StuckBound{{Step: 10401, StartedBefore: t0.Add(2 * time.Minute)}}}, []string{"op_02"}},
		{"cursor", store.ListParams{Before: "op_03"}, []string{"op_02", "op_01"}},
	} {
		if got := list(c.p); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	// Paging 2 at a time while the changes move (each page moves the
	// oldest change not yet seen and creates a new one): every change that
	// existed at the start is returned exactly once.
	seen, moved := map[string]int{}, map[string]bool{"op_03": true}
	cursor, n := "", 10
	for page := 0; page < 20; page++ {
		ids := list(store.ListParams{Before: cursor, Limit: 2})
		if len(ids) == 0 {
			break
		}
		for _, id := range ids {
			seen[id]++
		}
		cursor = ids[len(ids)-1]
		now = now.Add(time.Minute)
		for _, op := range ops {
			if seen[op.ID] == 0 && !moved[op.ID] {
				moved[op.ID] = true
				if _, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: op.ID, ExpectStep: 10401,
					ToStep: 10402, ToStatus: store.StatusApprovalSent, Event: store.EventParams{Type: store.EventTransition}}); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		create(t, s, newOp(fmt.Sprintf("op_%02d", n), fmt.Sprintf("svc%d", n)))
		n++
	}
	for _, op := range ops {
		if seen[op.ID] != 1 {
			t.Errorf("%s returned %d times while paging, want once", op.ID, seen[op.ID])
		}
	}
}

// ReadOverview counts the changes of the asked statuses per project (pairs
// with none left out), names when the newest webhook delivery was stored
// (zero before any), and counts no failing job where River has none.
func testReadOverview(t *testing.T, open Open) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := open(t)(Opts{NowFunc: func() time.Time { return now }})
	ctx := context.Background()
	o, err := s.ReadOverview(ctx, s.DB(), []string{store.StatusApprovalSending}, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(o.ByProject) != 0 || !o.LastDeliveryAt.IsZero() || o.RetryingJobs != 0 || o.DiscardedJobs != 0 {
		t.Fatalf("overview of an empty store: %+v", o)
	}
	for i, project := range []string{"g/b", "g/a", "g/b"} {
		op := newOp(fmt.Sprintf("op_%02d", i), fmt.Sprintf("svc%d", i))
		op.Project = project
		create(t, s, op)
	}
	if _, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: "op_02", ExpectStep: 10401,
		ToStep: 10402, ToStatus: store.StatusApprovalSent, Event: store.EventParams{Type: store.EventTransition}}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if _, _, err := s.InsertDelivery(ctx, store.Delivery{DedupeKey: "idem:overview", Event: "Merge Request Hook", ProjectID: 7,
		Body: []byte(`{}`)}, deliveryJob); err != nil {
		t.Fatal(err)
	}
	o, err = s.ReadOverview(ctx, s.DB(), []string{store.StatusApprovalSending, store.StatusApprovalSent, store.StatusMerging}, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []store.ProjectCount{{Project: "g/a", Status: store.StatusApprovalSending, Count: 1},
		{Project: "g/b", Status: store.StatusApprovalSending, Count: 1}, {Project: "g/b", Status: store.StatusApprovalSent, Count: 1}}
	if !slices.Equal(o.ByProject, want) {
		t.Errorf("by project %+v, want %+v", o.ByProject, want)
	}
	if !o.LastDeliveryAt.Equal(now) {
		t.Errorf("last delivery at %v, want %v", o.LastDeliveryAt, now)
	}
}
