package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"changebot/store"
	"changebot/store/postgres"
)

// setStatus puts op and its binding at status directly (the store does not
// know which step implies which status; flows does).
func setStatus(t *testing.T, s *postgres.Store, op store.Operation, status string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, `UPDATE operations SET status = $2 WHERE id = $1`, op.ID, status); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE bindings SET status = $3 WHERE subject_id = $1 AND target_key = $2`,
		op.SubjectID, op.TargetKey, status); err != nil {
		t.Fatal(err)
	}
}

// TestBindingTakenOverAfterFinishedChange (issue 9, defect 1): a binding
// whose change is VALIDATED, REJECTED or CLOSED is taken over by a new
// change, reset in place with the new operation id; any other status keeps
// it, and the refusal names the change, and for a failed one says to retry
// or cancel it.
func TestBindingTakenOverAfterFinishedChange(t *testing.T) {
	t.Parallel()
	s, sc := setup(t)
	ctx := context.Background()
	free := map[string]bool{store.StatusValidated: true, store.StatusRejected: true, store.StatusClosed: true}
	for i, status := range store.AllStatuses {
		t.Run(status, func(t *testing.T) {
			subject := fmt.Sprintf("svc-%d", i)
			first := create(t, s, newOp(fmt.Sprintf("op_first_%d", i), subject))
			// Its merge request, which the refusal names.
			if _, err := sc.Pool.Exec(ctx, `UPDATE operations SET mr_iid = 6 WHERE id = $1`, first.ID); err != nil {
				t.Fatal(err)
			}
			first.MRIID = 6
			setStatus(t, s, first, status)
			second := newOp(fmt.Sprintf("op_second_%d", i), subject)
			_, created, err := s.CreateOperation(ctx, store.CreateParams{Operation: second,
				Event: store.EventParams{Type: store.EventSubmitted}})
			b, berr := s.GetBinding(ctx, s.DB(), subject, "prod")
			if berr != nil {
				t.Fatal(berr)
			}
			if free[status] != store.IsReappliable(status) {
				t.Fatalf("IsReappliable(%s) = %v, want %v", status, store.IsReappliable(status), free[status])
			}
			if free[status] {
				if err != nil || !created {
					t.Fatalf("new change after %s: created=%v err=%v, want it to take the binding", status, created, err)
				}
				if b.OperationID != second.ID || b.Status != second.Status {
					t.Fatalf("binding after %s: %+v, want it reset to %s at %s", status, b, second.ID, second.Status)
				}
				_, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: first.ID, ExpectStep: first.Step,
					ToStep: 10201, ToStatus: store.StatusClosed, Event: store.EventParams{Type: store.EventTransition}})
				if !errors.Is(err, store.ErrBindingNotOwned) {
					t.Fatalf("late transition of the old change: %v, want ErrBindingNotOwned", err)
				}
				return
			}
			var active *store.ActiveChangeError
			if !errors.As(err, &active) || !errors.Is(err, store.ErrActiveChange) || created {
				t.Fatalf("new change while %s: created=%v err=%v, want ActiveChangeError", status, created, err)
			}
			if active.OperationID != first.ID || active.Status != status || b.OperationID != first.ID {
				t.Fatalf("refusal %+v, binding %+v; want both to name %s at %s", active, b, first.ID, status)
			}
			if active.SubjectID != first.SubjectID || active.TargetKey != first.TargetKey || active.MRIID != first.MRIID ||
				active.Platform != store.PlatformOr(first.Platform) {
				t.Errorf("refusal %#v does not name the binding %s/%s and the holder's merge request %d on %s",
					active, first.SubjectID, first.TargetKey, first.MRIID, first.Platform)
			}
			failed := status == store.StatusCreateFailed || status == store.StatusHandleFailed
			if failed != active.Failed() {
				t.Errorf("refusal for %s: Failed() = %v", status, active.Failed())
			}
			if _, err := s.GetOperation(ctx, s.DB(), second.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the refused change was stored: %v", err)
			}
		})
	}
}

// TestConcurrentFirstSubmissionsOneWins (issue 9, defect 2): concurrent
// first changes for a binding that has no row yet: exactly one takes it,
// every other one is refused with ErrActiveChange naming the winner, and
// only the winner's operation is stored.
func TestConcurrentFirstSubmissionsOneWins(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	for round := range 5 {
		subject := fmt.Sprintf("race-%d", round)
		const n = 8
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, n)
		created := make([]bool, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, created[i], errs[i] = s.CreateOperation(ctx, store.CreateParams{
					Operation: newOp(fmt.Sprintf("op_%s_%d", subject, i), subject),
					Event:     store.EventParams{Type: store.EventSubmitted}})
			}()
		}
		close(start)
		wg.Wait()
		b, err := s.GetBinding(ctx, s.DB(), subject, "prod")
		if err != nil {
			t.Fatal(err)
		}
		wins := 0
		for i := range n {
			var active *store.ActiveChangeError
			switch {
			case errs[i] == nil && created[i]:
				wins++
				if want := fmt.Sprintf("op_%s_%d", subject, i); b.OperationID != want {
					t.Errorf("round %d: binding owned by %s, but %s was told it took it", round, b.OperationID, want)
				}
			case errors.As(errs[i], &active):
				if active.OperationID != b.OperationID {
					t.Errorf("round %d: refusal names %s, binding owned by %s", round, active.OperationID, b.OperationID)
				}
			default:
				t.Errorf("round %d, submission %d: created=%v err=%v", round, i, created[i], errs[i])
			}
		}
		var ops int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM operations WHERE subject_id = $1`, subject).Scan(&ops); err != nil {
			t.Fatal(err)
		}
		if wins != 1 || ops != 1 {
			t.Fatalf("round %d: %d submissions took the binding and %d operations are stored, want 1 and 1", round, wins, ops)
		}
	}
}
