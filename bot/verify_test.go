package bot

import (
	"context"
	"strings"
	"sync"
	"testing"

	"changebot/cli"
	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// TestVerifyOnALiveSystem (issue 9, defect 14): `changebot verify` reads
// each operation and its events in one snapshot, so changes moving while it
// runs are never reported broken.
func TestVerifyOnALiveSystem(t *testing.T) {
	t.Parallel()
	sc := pgtest.New(t)
	st, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op, _, err := st.CreateOperation(ctx, store.CreateParams{
		Operation: store.Operation{ID: "op_live", SubjectID: "svc", TargetKey: "prod", Project: "g/r", Title: "t",
			RequestedBy: "alice", Step: 10401, Status: store.StatusApprovalSending},
		Event: store.EventParams{Type: store.EventSubmitted, Actor: "alice", Source: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	// A writer moves the change back and forth while verify runs.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		steps := [][2]any{{10402, store.StatusApprovalSent}, {10401, store.StatusApprovalSending}}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			from, to := steps[(i+1)%2], steps[i%2]
			if _, _, err := st.ApplyTransition(ctx, store.TransitionParams{OperationID: op.ID, ExpectStep: from[0].(int),
				ToStep: to[0].(int), ToStatus: to[1].(string), Event: store.EventParams{Type: store.EventTransition, Source: "test"}}); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	for range 300 {
		var out strings.Builder
		if err := cli.VerifyHistories(ctx, st, nil, &out); err != nil {
			t.Fatalf("verify while the change moves: %v\n%s", err, out.String())
		}
	}
}
