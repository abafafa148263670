package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"changebot/store"
)

// testNotificationDeliveries (issue 25 point 3): the delivery log keeps
// one row per destination and delivery key, counting attempts, with the
// last status and error; the first delivered attempt sets delivered_at and
// a later attempt never takes it back; the list filters by operation and
// destination, newest first; and a transition's EventJobsFunc sees the
// operation as written and the event with its sequence number.
func testNotificationDeliveries(t *testing.T, open Open) {
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s := open(t)(Opts{NowFunc: clock})

	record := func(a store.NotificationAttempt) store.NotificationDelivery {
		t.Helper()
		d, err := s.RecordNotificationAttempt(ctx, s.DB(), a)
		if err != nil {
			t.Fatalf("recording %+v: %v", a, err)
		}
		return d
	}
	hook := store.NotificationAttempt{Destination: "hook", Event: "failed", OperationID: "op_n_a", DeliveryKey: "op_n_a:3"}
	a := hook
	a.State, a.StatusCode, a.Error = store.NotificationRetrying, 503, "answered 503"
	d := record(a)
	if d.Attempts != 1 || d.State != store.NotificationRetrying || d.LastStatusCode != 503 || !d.DeliveredAt.IsZero() ||
		!d.FirstAttemptAt.Equal(now) {
		t.Fatalf("first attempt recorded as %+v", d)
	}
	now = now.Add(2 * time.Second)
	a.State, a.StatusCode, a.Error = store.NotificationDelivered, 200, ""
	d = record(a)
	if d.Attempts != 2 || d.State != store.NotificationDelivered || d.LastStatusCode != 200 || d.LastError != "" ||
		!d.DeliveredAt.Equal(now) || !d.LastAttemptAt.Equal(now) || !d.FirstAttemptAt.Equal(now.Add(-2*time.Second)) {
		t.Fatalf("delivered attempt recorded as %+v", d)
	}
	delivered := now
	now = now.Add(time.Second)
	a.State, a.StatusCode, a.Error = store.NotificationFailed, 0, "connection refused"
	if d = record(a); d.Attempts != 3 || d.State != store.NotificationDelivered || !d.DeliveredAt.Equal(delivered) {
		t.Fatalf("a late failed attempt after the delivery gave %+v, want it still delivered at %s", d, delivered)
	}

	now = now.Add(time.Second)
	chat := store.NotificationAttempt{Destination: "chat", Event: "failed", OperationID: "op_n_a", DeliveryKey: "op_n_a:3",
		State: store.NotificationFailed, StatusCode: 404, Error: "answered 404"}
	record(chat)
	now = now.Add(time.Second)
	other := store.NotificationAttempt{Destination: "hook", Event: "merged", OperationID: "op_n_b", DeliveryKey: "op_n_b:7",
		State: store.NotificationDelivered, StatusCode: 204}
	record(other)

	tests := []struct {
		name string
		p    store.NotificationListParams
		want []string // destination/key, newest first
	}{
		{"all", store.NotificationListParams{}, []string{"hook/op_n_b:7", "chat/op_n_a:3", "hook/op_n_a:3"}},
		{"one operation", store.NotificationListParams{OperationID: "op_n_a"}, []string{"chat/op_n_a:3", "hook/op_n_a:3"}},
		{"one destination", store.NotificationListParams{Destination: "hook"}, []string{"hook/op_n_b:7", "hook/op_n_a:3"}},
		{"both", store.NotificationListParams{OperationID: "op_n_a", Destination: "chat"}, []string{"chat/op_n_a:3"}},
		{"limit", store.NotificationListParams{Limit: 1}, []string{"hook/op_n_b:7"}},
		{"none", store.NotificationListParams{OperationID: "op_none"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, err := s.ListNotificationDeliveries(ctx, s.DB(), tt.p)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range ds {
				got = append(got, d.Destination+"/"+d.DeliveryKey)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("listed %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("listed %v, want %v", got, tt.want)
				}
			}
		})
	}
	if _, err := s.RecordNotificationAttempt(ctx, s.DB(), store.NotificationAttempt{Destination: "hook"}); err == nil {
		t.Fatal("an attempt naming no delivery was recorded")
	}

	// EventJobsFunc runs in the transaction with the row as written and
	// the event appended.
	op := create(t, s, newOp("op_n_c", "svc-n-c"))
	var seen store.Event
	var seenOp store.Operation
	moved, ev, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: op.ID, ExpectStep: op.Step, ExpectVersion: op.Version,
		ToStep: 10402, ToStatus: store.StatusApprovalSent,
		Event: store.EventParams{Type: store.EventTransition, Actor: "changebot", Source: "job:x"},
		EventJobsFunc: func(o store.Operation, e store.Event) []river.InsertManyParams {
			seenOp, seen = o, e
			return []river.InsertManyParams{deliveryJob(1)}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if seen.Seq != ev.Seq || seen.Seq < 2 || seen.ToStep != 10402 || seenOp.Version != moved.Version || seenOp.Status != store.StatusApprovalSent {
		t.Fatalf("EventJobsFunc saw op %+v event %+v; the move wrote %+v and %+v", seenOp, seen, moved, ev)
	}
}
