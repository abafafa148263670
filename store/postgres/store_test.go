package postgres_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

func setup(t *testing.T) (*postgres.Store, pgtest.Schema) {
	t.Helper()
	sc := pgtest.New(t)
	s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	return s, sc
}

func newOp(id, subject string) store.Operation {
	return store.Operation{ID: id, SubjectID: subject, TargetKey: "prod", Project: "g/r", Title: "t",
		RequestedBy: "alice", ApprovalFirst: true, Step: 10401, Status: store.StatusApprovalSending,
		Files: []store.File{{Path: "a.yaml", Content: "x: 1"}}}
}

func create(t *testing.T, s *postgres.Store, op store.Operation) store.Operation {
	t.Helper()
	got, created, err := s.CreateOperation(context.Background(), store.CreateParams{Operation: op,
		Event: store.EventParams{Type: store.EventSubmitted, Actor: op.RequestedBy, Source: "api"}})
	if err != nil || !created {
		t.Fatalf("CreateOperation: created=%v err=%v", created, err)
	}
	return got
}

func TestMigrateIsReversible(t *testing.T) {
	t.Parallel()
	_, sc := setup(t)
	ctx := context.Background()
	if err := postgres.Migrate(ctx, sc.Pool, &postgres.MigrateOpts{Schema: sc.Name}); err != nil {
		t.Fatalf("second up: %v", err)
	}
	if v, cur, err := postgres.MigrationStatus(sc.Pool, sc.Name); err != nil || !cur || v != postgres.LatestMigration {
		t.Fatalf("status after up: v=%d current=%v err=%v", v, cur, err)
	}
	if err := postgres.Migrate(ctx, sc.Pool, &postgres.MigrateOpts{Schema: sc.Name, Down: true}); err != nil {
		t.Fatalf("down: %v", err)
	}
	var n int
	if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name IN ('operations','bindings','change_events','river_job')`, sc.Name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("tables left after down: %d (%v)", n, err)
	}
	if err := postgres.Migrate(ctx, sc.Pool, &postgres.MigrateOpts{Schema: sc.Name}); err != nil {
		t.Fatalf("up again: %v", err)
	}
}

func TestCreateOperationBindingRules(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	op := create(t, s, newOp("op_1", "svc"))
	_, _, err := s.CreateOperation(ctx, store.CreateParams{Operation: newOp("op_2", "svc"), Event: store.EventParams{Type: store.EventSubmitted}})
	if !errors.Is(err, store.ErrActiveChange) {
		t.Fatalf("second active change on a binding: got %v, want ErrActiveChange", err)
	}
	// Reject the first: the binding becomes reappliable and is reset in place.
	if _, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: op.ID, ExpectStep: op.Step,
		ExpectVersion: op.Version, ToStep: 10403, ToStatus: store.StatusRejected,
		Event: store.EventParams{Type: store.EventTransition}}); err != nil {
		t.Fatal(err)
	}
	create(t, s, newOp("op_2", "svc"))
	b, err := s.GetBinding(ctx, s.DB(), "svc", "prod")
	if err != nil || b.OperationID != "op_2" || b.Status != store.StatusApprovalSending {
		t.Fatalf("binding after re-apply: %+v %v", b, err)
	}
	// The old operation no longer owns the binding: its late transition is stale.
	_, _, err = s.ApplyTransition(ctx, store.TransitionParams{OperationID: "op_1", ExpectStep: 10403,
		ToStep: 10201, ToStatus: store.StatusClosed, Event: store.EventParams{Type: store.EventTransition}})
	if !errors.Is(err, store.ErrBindingNotOwned) {
		t.Fatalf("late transition of the old operation: %v, want ErrBindingNotOwned", err)
	}
}

func TestIdempotencyKeyReturnsExisting(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	op := newOp("op_a", "svc")
	op.IdempotencyKey = "k1"
	create(t, s, op)
	dup := newOp("op_b", "other")
	dup.IdempotencyKey = "k1"
	got, created, err := s.CreateOperation(context.Background(), store.CreateParams{Operation: dup, Event: store.EventParams{Type: store.EventSubmitted}})
	if err != nil || created || got.ID != "op_a" {
		t.Fatalf("same key: got %s created=%v err=%v", got.ID, created, err)
	}
}

func TestConcurrentTransitionsOneWinner(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	op := create(t, s, newOp("op_c", "svc"))
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: op.ID, ExpectStep: op.Step,
				ExpectVersion: op.Version, ToStep: 10402, ToStatus: store.StatusApprovalSent,
				Event: store.EventParams{Type: store.EventTransition, Actor: "changebot"}})
			if err == nil {
				wins.Add(1)
			} else if !errors.Is(err, store.ErrVersionConflict) && !errors.Is(err, store.ErrStepMismatch) {
				t.Errorf("loser error: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("winners = %d, want 1", wins.Load())
	}
	h, err := s.ReadHistory(ctx, op.ID)
	events := h.Stored
	if err != nil || len(events) != 2 {
		t.Fatalf("events = %d (%v), want 2", len(events), err)
	}
	if seq, err := store.VerifyChain(events); err != nil {
		t.Fatalf("chain broken at %d: %v", seq, err)
	}
	events[1].Actor = "mallory"
	if _, err := store.VerifyChain(events); err == nil {
		t.Fatal("a tampered event passed VerifyChain")
	}
}

// TestStrangeTextNeverBlocksAWrite: a NUL or invalid UTF-8 in a failure
// detail or an event payload (texts that come from GitLab or users) is
// stored, replaced, instead of failing the state write.
func TestStrangeTextNeverBlocksAWrite(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	op := create(t, s, newOp("op_nul", "svc"))
	_, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: op.ID, ExpectStep: op.Step,
		ExpectVersion: op.Version, ToStep: 10402, ToStatus: store.StatusApprovalSent,
		Update: func(o *store.Operation) { o.Detail = "GitLab said \x00 and \xff" },
		Event:  store.EventParams{Type: store.EventTransition, Actor: "a\x00b", Payload: map[string]any{"reason": "x\x00y", "n": []any{"\x00"}}}})
	if err != nil {
		t.Fatalf("write with strange text: %v", err)
	}
	got, err := s.GetOperation(ctx, s.DB(), op.ID)
	if err != nil || got.Detail != "GitLab said \uFFFD and \uFFFD" {
		t.Fatalf("detail %q (%v)", got.Detail, err)
	}
	h, _ := s.ReadHistory(ctx, op.ID)
	if _, err := store.VerifyChain(h.Stored); err != nil {
		t.Fatalf("chain: %v", err)
	}
}
