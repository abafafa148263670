package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"changebot/store"
)

// cases are the contract's cases, each named after the test it was in the
// PostgreSQL package before the split (issue 11).
var cases = []struct {
	name string
	run  func(t *testing.T, open Open)
}{
	{"CreateOperationBindingRules", testCreateOperationBindingRules},
	{"AdoptedMergeRequests", testAdoptedMergeRequests},
	{"IdempotencyKeyReturnsExisting", testIdempotencyKeyReturnsExisting},
	{"ConcurrentTransitionsOneWinner", testConcurrentTransitionsOneWinner},
	{"StrangeTextNeverBlocksAWrite", testStrangeTextNeverBlocksAWrite},
	{"GitLabApprovalsNeverCountTheRequester", testGitLabApprovalsNeverCountTheRequester},
	{"AccountWaits", testAccountWaits},
	{"MergeQueues", testMergeQueues},
	{"NotificationDeliveries", testNotificationDeliveries},
	{"RepoPolicies", testRepoPolicies},
	{"Rollouts", testRollouts},
	{"RolloutNoticeConcurrent", testRolloutNoticeConcurrent},
	{"AccountBudget", testAccountBudget},
	{"AccountBudgetConcurrent", testAccountBudgetConcurrent},
	{"StatusNoteClaims", testStatusNoteClaims},
	{"StatusNoteClaimRenewal", testStatusNoteClaimRenewal},
	{"StatusNoteState", testStatusNoteState},
	{"SameNumbersOnTwoPlatforms", testSameNumbersOnTwoPlatforms},
	{"DeliveryBodyStoredByteIdentical", testDeliveryBodyStoredByteIdentical},
	{"InsertDeliveriesDedupe", testInsertDeliveriesDedupe},
	{"InsertDeliveriesConcurrent", testInsertDeliveriesConcurrent},
	{"DispatchDeliveriesConcurrent", testDispatchDeliveriesConcurrent},
	{"DispatchAfterCrash", testDispatchAfterCrash},
	{"CallbackRequestsDedupePerKind", testCallbackRequestsDedupePerKind},
	{"CommitClaims", testCommitClaims},
	{"CommitClaimInTransaction", testCommitClaimInTransaction},
	{"ListChangesFiltersAndPages", testListChangesFiltersAndPages},
	{"ReadOverview", testReadOverview},
	{"SnapshotsAndEventsAfter", testSnapshotsAndEventsAfter},
	{"ListOperationsByStatusSeveral", testListOperationsByStatusSeveral},
	{"SaveSettingCheckSerialised", testSaveSettingCheckSerialised},
}

// ListOperationsByStatusSeveral: ListOperationsByStatus with two statuses
// and a time window lists exactly the operations in either status, oldest
// update first (SQLite's generated query once read a status as a time
// bound when given more than one).
func testListOperationsByStatusSeveral(t *testing.T, open Open) {
	s := open(t)(Opts{})
	ctx := context.Background()
	want := map[string]bool{}
	for i, st := range []string{store.StatusApprovalSending, store.StatusMRCreating, store.StatusMerged} {
		op := newOp(fmt.Sprintf("op_list_%d", i), fmt.Sprintf("svc-%d", i))
		op.Status = st
		create(t, s, op)
		if st != store.StatusMRCreating {
			want[op.ID] = true
		}
	}
	from, to := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	got, err := s.ListOperationsByStatus(ctx, s.DB(), []string{store.StatusApprovalSending, store.StatusMerged}, from, to, 10)
	if err != nil {
		t.Fatalf("ListOperationsByStatus with two statuses: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d operations, want %d: %+v", len(got), len(want), got)
	}
	for _, op := range got {
		if !want[op.ID] {
			t.Errorf("listed %s (status %s), not asked for", op.ID, op.Status)
		}
	}
	none, err := s.ListOperationsByStatus(ctx, s.DB(), []string{store.StatusApprovalSending, store.StatusMerged}, to, to.Add(time.Hour), 10)
	if err != nil || len(none) != 0 {
		t.Errorf("a window after every update listed %d (err %v), want none", len(none), err)
	}
}

// SnapshotsAndEventsAfter (issue 13 point 5): ListEventsAfter lists the
// events after a sequence number, upcast; NearestSnapshot finds the
// snapshot of the highest sequence number taken at or before a time;
// PutSnapshot keeps the first snapshot stored at a sequence number.
func testSnapshotsAndEventsAfter(t *testing.T, open Open) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	s := open(t)(Opts{NowFunc: func() time.Time { now = now.Add(time.Minute); return now }})
	ctx := context.Background()
	op := create(t, s, newOp("op_snap", "svc"))
	for range 4 {
		if _, err := s.AppendEvent(ctx, op.ID, store.EventParams{Type: store.EventRefused, Actor: "bob", Source: "api"}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ListEvents(ctx, s.DB(), op.ID)
	if err != nil || len(all) != 5 {
		t.Fatalf("events: %d %v", len(all), err)
	}
	after, err := s.ListEventsAfter(ctx, s.DB(), op.ID, 2)
	if err != nil || len(after) != 3 || after[0].Seq != 3 || after[2].Seq != 5 || after[0].Hash != all[2].Hash ||
		after[0].SchemaVersion != store.EventSchemaVersion {
		t.Fatalf("events after 2: %+v %v", after, err)
	}
	if _, ok, err := s.NearestSnapshot(ctx, s.DB(), op.ID, all[4].OccurredAt); ok || err != nil {
		t.Fatalf("a snapshot before any was stored: %v %v", ok, err)
	}
	put := func(seq int64, state string) {
		t.Helper()
		if err := s.PutSnapshot(ctx, s.DB(), store.StateSnapshot{OperationID: op.ID, Seq: seq,
			OccurredAt: all[seq-1].OccurredAt, State: []byte(state)}); err != nil {
			t.Fatal(err)
		}
	}
	put(2, `{"n":2}`)
	put(4, `{"n":4}`)
	put(2, `{"n":"again"}`)
	for _, c := range []struct {
		name string
		at   time.Time
		seq  int64
	}{
		{"before the first snapshot's event", all[1].OccurredAt.Add(-time.Second), 0},
		{"at the first snapshot's event", all[1].OccurredAt, 2},
		{"between the two", all[2].OccurredAt, 2},
		{"after the last", all[4].OccurredAt.Add(time.Hour), 4},
	} {
		snap, ok, err := s.NearestSnapshot(ctx, s.DB(), op.ID, c.at)
		if err != nil || ok != (c.seq > 0) || snap.Seq != c.seq {
			t.Errorf("%s: snapshot %+v %v %v, want seq %d", c.name, snap, ok, err, c.seq)
			continue
		}
		var state struct{ N any }
		if ok && (!snap.OccurredAt.Equal(all[c.seq-1].OccurredAt) || json.Unmarshal(snap.State, &state) != nil ||
			state.N != float64(c.seq)) {
			t.Errorf("%s: snapshot %+v (%s), want the first state stored at %d", c.name, snap, snap.State, c.seq)
		}
	}
}

// CreateOperationBindingRules: see the case name.
func testCreateOperationBindingRules(t *testing.T, open Open) {
	s := open(t)(Opts{})
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

// IdempotencyKeyReturnsExisting: see the case name.
func testIdempotencyKeyReturnsExisting(t *testing.T, open Open) {
	s := open(t)(Opts{})
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

// ConcurrentTransitionsOneWinner: see the case name.
func testConcurrentTransitionsOneWinner(t *testing.T, open Open) {
	s := open(t)(Opts{})
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

// StrangeTextNeverBlocksAWrite: a NUL or invalid UTF-8 in a failure
// detail or an event payload (texts that come from GitLab or users) is
// stored, replaced, instead of failing the state write.
func testStrangeTextNeverBlocksAWrite(t *testing.T, open Open) {
	s := open(t)(Opts{})
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

// GitLabApprovalsNeverCountTheRequester: an approval recorded for the
// change's own requester (newOp's alice) is not counted.
func testGitLabApprovalsNeverCountTheRequester(t *testing.T, open Open) {
	s := open(t)(Opts{})
	ctx := context.Background()
	op := create(t, s, newOp("op_self", "svc"))
	for _, u := range []string{"alice", "carol"} {
		if _, _, err := s.AddGitLabApproval(ctx, s.DB(), op.ID, u, "test"); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.CountGitLabApprovals(ctx, s.DB(), op.ID); err != nil || n != 1 {
		t.Fatalf("approvals counted: %d %v, want 1 (carol)", n, err)
	}
}

// AccountWaits: an account never blocked reads the zero time; a block
// is seen by every store on the schema (every replica); a shorter block
// recorded later never shortens a longer one; accounts are independent.
func testAccountWaits(t *testing.T, open Open) {
	db := open(t)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	replica := func() store.Store { return db(Opts{NowFunc: func() time.Time { return now }}) }
	a, b := replica(), replica()
	ctx := context.Background()
	read := func(s store.Store, account string) time.Time {
		t.Helper()
		u, err := s.AccountBlockedUntil(ctx, account)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	if u := read(a, "robot"); !u.IsZero() {
		t.Fatalf("never blocked: got %s", u)
	}
	long, short := now.Add(time.Minute), now.Add(10*time.Second)
	if err := a.BlockAccountUntil(ctx, "robot", long); err != nil {
		t.Fatal(err)
	}
	if u := read(b, "robot"); !u.Equal(long) {
		t.Fatalf("the other replica reads %s, want %s", u, long)
	}
	if err := b.BlockAccountUntil(ctx, "robot", short); err != nil {
		t.Fatal(err)
	}
	if u := read(a, "robot"); !u.Equal(long) {
		t.Fatalf("a shorter wait replaced the longer one: %s", u)
	}
	later := now.Add(2 * time.Minute)
	if err := b.BlockAccountUntil(ctx, "robot", later); err != nil {
		t.Fatal(err)
	}
	if u := read(a, "robot"); !u.Equal(later) {
		t.Fatalf("a longer wait was not recorded: %s", u)
	}
	if u := read(a, "reviewer"); !u.IsZero() {
		t.Fatalf("another account is blocked too: %s", u)
	}
}

// AccountBudget: a new account's bucket is full; takes beyond it are
// refused until time refills it (by the caller's clock, never backwards);
// a take that must keep a reserve is refused while a take without one is
// granted; the account's wait refuses every take; GitLab's
// RateLimit-Remaining lowers the bucket; accounts are independent.
func testAccountBudget(t *testing.T, open Open) {
	db := open(t)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s := db(Opts{NowFunc: func() time.Time { return now }})
	ctx := context.Background()
	rate := store.BudgetRate{Capacity: 5, PerSecond: 2}
	take := func(account string, at time.Time, keep float64) store.BudgetTake {
		t.Helper()
		got, err := s.TakeAccountBudget(ctx, store.BudgetTakeParams{Account: account, Now: at, Rate: rate, Keep: keep, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for i := range 5 {
		if got := take("robot", now, 0); !got.Granted || got.Tokens != float64(4-i) {
			t.Fatalf("take %d of a full bucket of 5: %+v", i+1, got)
		}
	}
	if got := take("robot", now, 0); got.Granted {
		t.Fatalf("a sixth take at the same moment was granted: %+v", got)
	}
	if got := take("robot", now.Add(-time.Minute), 0); got.Granted {
		t.Fatalf("a clock behind the last take refilled the bucket: %+v", got)
	}
	// 2 calls per second: after 1.5 s three calls are back.
	at := now.Add(1500 * time.Millisecond)
	if got := take("robot", at, 2); !got.Granted || got.Tokens != 2 {
		t.Fatalf("3 refilled, keep 2: want granted with 2 left, got %+v", got)
	}
	if got := take("robot", at, 2); got.Granted {
		t.Fatalf("a take keeping 2 of 2 was granted: %+v", got)
	}
	if got := take("robot", at, 0); !got.Granted || got.Tokens != 1 {
		t.Fatalf("a take without reserve: want granted with 1 left, got %+v", got)
	}
	// Refill stops at capacity.
	at = at.Add(time.Hour)
	if got := take("robot", at, 0); !got.Granted || got.Tokens != 4 {
		t.Fatalf("after an hour: want a full bucket less one (4), got %+v", got)
	}
	// The account's wait (a 429) refuses every take until it ends.
	if err := s.BlockAccountUntil(ctx, "robot", at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := take("robot", at.Add(time.Second), 0); got.Granted || !got.BlockedUntil.Equal(at.Add(time.Minute)) {
		t.Fatalf("a take during the wait: %+v", got)
	}
	at = at.Add(time.Minute)
	if got := take("robot", at, 0); !got.Granted {
		t.Fatalf("a take when the wait ends: %+v", got)
	}
	// GitLab says 1 call is left: the bucket holds 1, not 5.
	if err := s.ClampAccountBudget(ctx, store.BudgetClampParams{Account: "robot", Now: at, Rate: rate, Remaining: 1}); err != nil {
		t.Fatal(err)
	}
	if got := take("robot", at, 0); !got.Granted || got.Tokens != 0 {
		t.Fatalf("after RateLimit-Remaining 1: %+v", got)
	}
	if got := take("robot", at, 0); got.Granted {
		t.Fatalf("a take beyond RateLimit-Remaining was granted: %+v", got)
	}
	if got := take("reviewer", at, 0); !got.Granted || got.Tokens != 4 {
		t.Fatalf("another account's bucket: %+v", got)
	}
	if err := s.ClampAccountBudget(ctx, store.BudgetClampParams{Account: "nobody", Now: at, Rate: rate, Remaining: 0}); err != nil {
		t.Fatalf("clamping an account that never took: %v", err)
	}
}

// AccountBudgetConcurrent: two replicas (stores on one database), eight
// goroutines each, take from one bucket of 40 calls at one moment: exactly
// 40 takes are granted, never more (no overdraw), and the bucket ends
// empty.
func testAccountBudgetConcurrent(t *testing.T, open Open) {
	db := open(t)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	replicas := []store.Store{db(Opts{}), db(Opts{})}
	const capacity, workers, each = 40, 16, 5
	rate := store.BudgetRate{Capacity: capacity, PerSecond: 1}
	var (
		mu      sync.Mutex
		granted int
		errs    []error
		wg      sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				got, err := replicas[w%2].TakeAccountBudget(context.Background(),
					store.BudgetTakeParams{Account: "robot", Now: now, Rate: rate, N: 1})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if got.Granted {
					granted++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent takes failed: %v", errs)
	}
	if granted != capacity {
		t.Fatalf("%d of %d concurrent takes granted from a bucket of %d", granted, workers*each, capacity)
	}
	got, err := replicas[0].TakeAccountBudget(context.Background(), store.BudgetTakeParams{Account: "robot", Now: now, Rate: rate, N: 1})
	if err != nil || got.Granted || got.Tokens != 0 {
		t.Fatalf("after the race: %+v %v, want an empty bucket", got, err)
	}
}

// StatusNoteClaims: one live claim per MR; it ends when recorded or
// released by its holder, or when its lease runs out (a replica died), and
// a stale holder can neither release nor overwrite a newer render.
func testStatusNoteClaims(t *testing.T, open Open) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s := open(t)(Opts{NowFunc: func() time.Time { return now }})
	ctx := context.Background()
	claim := func(iid int64) (store.NoteClaim, bool) {
		t.Helper()
		c, ok, err := s.ClaimStatusNote(ctx, store.PlatformGitLab, 7, iid, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return c, ok
	}
	first, ok := claim(1)
	if !ok {
		t.Fatal("first claim refused")
	}
	if _, ok := claim(1); ok {
		t.Fatal("a second live claim on the same MR was granted")
	}
	if _, ok := claim(2); !ok {
		t.Fatal("a claim on another MR was refused")
	}
	if wrote, err := s.RecordStatusNote(ctx, first, store.StatusNote{ProjectID: 7, MRIID: 1, NoteID: 50, OperationID: "op_a", RenderedSeq: 4}); err != nil || !wrote {
		t.Fatalf("record: %v %v", wrote, err)
	}
	second, ok := claim(1)
	if !ok {
		t.Fatal("claim after the record released it was refused")
	}
	// The holder dies; after the lease another refresh takes the note over.
	now = now.Add(time.Minute)
	third, ok := claim(1)
	if !ok {
		t.Fatal("an expired claim was not taken over")
	}
	if err := s.ReleaseStatusNote(ctx, s.DB(), second); err != nil {
		t.Fatal(err)
	}
	if _, ok := claim(1); ok {
		t.Fatal("the stale holder released the claim that took over")
	}
	if wrote, err := s.RecordStatusNote(ctx, second, store.StatusNote{ProjectID: 7, MRIID: 1, NoteID: 50, OperationID: "op_a", RenderedSeq: 3}); err != nil || wrote {
		t.Fatalf("a stale render was recorded over a newer one: %v %v", wrote, err)
	}
	if err := s.ReleaseStatusNote(ctx, s.DB(), third); err != nil {
		t.Fatal(err)
	}
	if _, ok := claim(1); !ok {
		t.Fatal("claim after release refused")
	}
	if n, err := s.GetStatusNote(ctx, s.DB(), store.PlatformGitLab, 7, 1); err != nil || n.RenderedSeq != 4 || n.NoteID != 50 {
		t.Fatalf("recorded note %+v %v", n, err)
	}
}

// StatusNoteClaimRenewal: a live holder extends its lease (the note
// stays claimed past the first lease); a holder whose claim was taken over
// learns it cannot renew (issue 10 point 6: short leases, renewed while the
// refresh writes).
func testStatusNoteClaimRenewal(t *testing.T, open Open) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s := open(t)(Opts{NowFunc: func() time.Time { return now }})
	ctx := context.Background()
	c, ok, err := s.ClaimStatusNote(ctx, store.PlatformGitLab, 7, 1, 5*time.Second)
	if err != nil || !ok || c.TakenOver {
		t.Fatalf("claim of a free MR: %v %v, taken over %v; want claimed, not taken over", ok, err, c.TakenOver)
	}
	now = now.Add(4 * time.Second)
	if ok, err := s.RenewStatusNote(ctx, c, 5*time.Second); err != nil || !ok {
		t.Fatalf("renewing a live claim: %v %v", ok, err)
	}
	now = now.Add(4 * time.Second) // past the first lease, within the renewed one
	if _, ok, err := s.ClaimStatusNote(ctx, store.PlatformGitLab, 7, 1, 5*time.Second); err != nil || ok {
		t.Fatalf("a renewed claim was taken over: %v %v", ok, err)
	}
	now = now.Add(2 * time.Second) // the holder stopped renewing: it died
	c2, ok, err := s.ClaimStatusNote(ctx, store.PlatformGitLab, 7, 1, 5*time.Second)
	if err != nil || !ok || !c2.TakenOver {
		t.Fatalf("an expired claim: %v %v, taken over %v; want claimed and taken over", ok, err, c2.TakenOver)
	}
	if ok, err := s.RenewStatusNote(ctx, c, 5*time.Second); err != nil || ok {
		t.Fatalf("the stale holder renewed a claim taken over: %v %v", ok, err)
	}
	// Released, the MR is free again: the next claim takes over nothing.
	if err := s.ReleaseStatusNote(ctx, s.DB(), c2); err != nil {
		t.Fatal(err)
	}
	if c3, ok, err := s.ClaimStatusNote(ctx, store.PlatformGitLab, 7, 1, 5*time.Second); err != nil || !ok || c3.TakenOver {
		t.Fatalf("claim after a release: %v %v, taken over %v; want claimed, not taken over", ok, err, c3.TakenOver)
	}
}

// DeliveryBodyStoredByteIdentical stores bodies that jsonb refused
// (\u0000, SQLSTATE 22P05) or would have rewritten (spacing, key order,
// duplicate keys), and reads each back byte for byte.
func testDeliveryBodyStoredByteIdentical(t *testing.T, open Open) {
	s := open(t)(Opts{})
	ctx := context.Background()
	tests := []struct {
		name string
		body string
	}{
		{name: "NUL escape in a string", body: `{"object_kind":"note","object_attributes":{"note":"a\u0000b"}}`},
		{name: "NUL escape as a key", body: `{"\u0000":1}`},
		{name: "formatting kept", body: "{ \"b\" : 1,\n  \"a\":[ 1 , 2 ], \"a\": 3 }\n"},
		{name: "non-ASCII", body: `{"title":"déploiement ✓ \ud83d\ude00"}`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := store.Delivery{DedupeKey: "idem:body-" + string(rune('a'+i)), Event: "Note Hook", ProjectID: 7, Body: []byte(tt.body)}
			id, inserted, err := s.InsertDelivery(ctx, d, deliveryJob)
			if err != nil || !inserted {
				t.Fatalf("InsertDelivery: inserted=%v err=%v", inserted, err)
			}
			got, err := s.GetDelivery(ctx, s.DB(), id)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Body, []byte(tt.body)) {
				t.Errorf("body read back as %q, want %q", got.Body, tt.body)
			}
			if got.DedupeKey != d.DedupeKey || got.Event != d.Event || got.ProjectID != d.ProjectID {
				t.Errorf("read back %+v, want the fields of %+v", got, d)
			}
		})
	}
}

// CallbackRequestsDedupePerKind (issue 9, defect 10): a request id is
// unique within its kind only.
func testCallbackRequestsDedupePerKind(t *testing.T, open Open) {
	s := open(t)(Opts{})
	ctx := context.Background()
	if err := s.InsertCallbackRequest(ctx, s.DB(), "42", "approval", "op_1", "ACCEPTED"); err != nil {
		t.Fatalf("approval 42: %v", err)
	}
	if err := s.InsertCallbackRequest(ctx, s.DB(), "42", "deploy", "op_2", "IGNORED_STALE"); err != nil {
		t.Fatalf("deploy 42 after approval 42: %v, want it recorded", err)
	}
	if err := s.InsertCallbackRequest(ctx, s.DB(), "42", "deploy", "op_2", "ACCEPTED"); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("deploy 42 again: %v, want ErrDuplicate", err)
	}
	for kind, want := range map[string]string{"approval": "ACCEPTED", "deploy": "IGNORED_STALE"} {
		if got, err := s.CallbackResult(ctx, s.DB(), kind, "42"); err != nil || got != want {
			t.Errorf("result of %s 42: %q %v, want %q", kind, got, err, want)
		}
	}
	if _, err := s.CallbackResult(ctx, s.DB(), "rate_limit", "42"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("result of an unseen kind: %v, want ErrNotFound", err)
	}
}

// CommitClaims: one claim per (run, step) with a positive token minted by
// the store, never reused; the holder is read back with the clock given
// (or the store's); a release needs the holder's token; a seed keeps an
// existing claim (flows/commitgate.DBStore relies on each).
func testCommitClaims(t *testing.T, open Open) {
	s := open(t)(Opts{})
	ctx := context.Background()
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	first := store.CommitClaim{RunID: "op_1", Step: "merge", Status: "MERGED", Branch: "main", Seq: 7, ClaimedAt: at}
	tok, ok, err := s.ClaimCommit(ctx, s.DB(), first)
	if err != nil || !ok || tok <= 0 {
		t.Fatalf("first claim = %d, %v, %v; want a positive token", tok, ok, err)
	}
	if tok2, ok, err := s.ClaimCommit(ctx, s.DB(), store.CommitClaim{RunID: "op_1", Step: "merge", Status: "FAILED"}); err != nil || ok || tok2 != 0 {
		t.Fatalf("second claim = %d, %v, %v; want refused", tok2, ok, err)
	}
	got, err := s.GetCommitClaim(ctx, s.DB(), "op_1", "merge")
	want := first
	want.Token = tok
	if err != nil || got != want {
		t.Fatalf("holder = %+v, %v; want %+v", got, err, want)
	}
	if _, err := s.GetCommitClaim(ctx, s.DB(), "op_1", "deploy"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unclaimed step: %v, want ErrNotFound", err)
	}
	if ok, err := s.ReleaseCommitClaim(ctx, s.DB(), "op_1", "merge", tok+1000); err != nil || ok {
		t.Fatalf("release with a stale token = %v, %v", ok, err)
	}
	if ok, err := s.ReleaseCommitClaim(ctx, s.DB(), "op_1", "merge", tok); err != nil || !ok {
		t.Fatalf("release with the token = %v, %v", ok, err)
	}
	tok3, ok, err := s.ClaimCommit(ctx, s.DB(), store.CommitClaim{RunID: "op_1", Step: "merge", Status: "MERGED"})
	if err != nil || !ok || tok3 == tok {
		t.Fatalf("claim after release = %d, %v, %v; want a new token", tok3, ok, err)
	}
	if h, err := s.GetCommitClaim(ctx, s.DB(), "op_1", "merge"); err != nil || h.ClaimedAt.IsZero() || h.ClaimedAt.Location() != time.UTC {
		t.Fatalf("claim on the store's clock: %+v, %v", h, err)
	}
	seed := store.CommitClaim{RunID: "op_2", Step: "merge", Status: "MERGED", Branch: "main", Seq: 3}
	for range 2 {
		if err := s.SeedCommitClaim(ctx, s.DB(), seed); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SeedCommitClaim(ctx, s.DB(), store.CommitClaim{RunID: "op_1", Step: "merge", Status: "OTHER"}); err != nil {
		t.Fatal(err)
	}
	if h, err := s.GetCommitClaim(ctx, s.DB(), "op_1", "merge"); err != nil || h.Status != "MERGED" || h.Token != tok3 {
		t.Fatalf("a seed replaced a claim: %+v, %v", h, err)
	}
	if n, err := s.CountCommitClaims(ctx, s.DB()); err != nil || n != 2 {
		t.Fatalf("count = %d, %v; want 2", n, err)
	}
}

// CommitClaimInTransaction: a claim made in a transaction commits or rolls
// back with it (fencing, DESIGN §6).
func testCommitClaimInTransaction(t *testing.T, open Open) {
	s := open(t)(Opts{})
	ctx := context.Background()
	c := store.CommitClaim{RunID: "op_1", Step: "validated", Status: "VALIDATED"}
	errRollback := errors.New("roll back")
	err := s.InTx(ctx, func(tx store.Tx) error {
		if _, ok, err := s.ClaimCommit(ctx, tx, c); err != nil || !ok {
			t.Errorf("claim in tx = %v, %v", ok, err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("InTx = %v, want fn's error as is", err)
	}
	if _, err := s.GetCommitClaim(ctx, s.DB(), c.RunID, c.Step); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rolled back claim: %v, want ErrNotFound", err)
	}
	if err := s.InTx(ctx, func(tx store.Tx) error {
		_, _, err := s.ClaimCommit(ctx, tx, c)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetCommitClaim(ctx, s.DB(), c.RunID, c.Step); err != nil {
		t.Fatalf("committed claim: %v", err)
	}
}

// StatusNoteState: one read gives the operation's MR, its newest event and
// what the MR's recorded note shows; current only when the note is the
// operation's and rendered its newest event; ErrNotFound without the
// operation.
func testStatusNoteState(t *testing.T, open Open) {
	s := open(t)(Opts{})
	ctx := context.Background()
	if _, err := s.StatusNoteState(ctx, s.DB(), "op_none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown operation: %v, want ErrNotFound", err)
	}
	op := create(t, s, newOp("op_note", "svc"))
	if _, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: op.ID, ExpectStep: op.Step, ToStep: 10402,
		ToStatus: store.StatusApprovalSent, Update: func(o *store.Operation) { o.ProjectID, o.MRIID = 7, 3 },
		Event: store.EventParams{Type: store.EventTransition, Actor: "changebot", Source: "test"}}); err != nil {
		t.Fatalf("ApplyTransition: %v", err)
	}
	st, err := s.StatusNoteState(ctx, s.DB(), op.ID)
	if err != nil || st.MRIID != 3 || st.ProjectID != 7 || st.Platform != store.PlatformGitLab || st.LastSeq != 2 ||
		st.NoteOperationID != "" || st.Current(op.ID) {
		t.Fatalf("before any note: %+v %v", st, err)
	}
	c, ok, err := s.ClaimStatusNote(ctx, store.PlatformGitLab, 7, 3, time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if _, err := s.RecordStatusNote(ctx, c, store.StatusNote{ProjectID: 7, MRIID: 3, NoteID: 9, OperationID: op.ID, RenderedSeq: 2}); err != nil {
		t.Fatal(err)
	}
	if st, err = s.StatusNoteState(ctx, s.DB(), op.ID); err != nil || st.RenderedSeq != 2 || !st.Current(op.ID) || st.Current("op_other") {
		t.Fatalf("after the note rendered event 2: %+v %v", st, err)
	}
	if _, err := s.AppendEvent(ctx, op.ID, store.EventParams{Type: store.EventRefused, Actor: "bob", Source: "api"}); err != nil {
		t.Fatal(err)
	}
	if st, err = s.StatusNoteState(ctx, s.DB(), op.ID); err != nil || st.LastSeq != 3 || st.Current(op.ID) {
		t.Fatalf("after event 3: %+v %v", st, err)
	}
}
