package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"changebot/store"
)

// testMergeQueues (issue 22): the head of a queue is one change at a time,
// also under concurrent claims from two replicas; only its holder gives it
// back, and giving it back makes the first waiting change's job due now;
// the waiting changes are in the order they became ready, those moved to
// the front first; a freeze records who and why and keeps the first
// freeze; two platforms' queues of the same numbers never meet.
func testMergeQueues(t *testing.T, open Open) {
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	opener := open(t)
	s := opener(Opts{NowFunc: clock})
	s2 := opener(Opts{NowFunc: clock})
	const waiting = 10112
	key := store.QueueKey{Platform: store.PlatformGitLab, ProjectID: 42, TargetBranch: "main"}

	var ids []string
	for i, id := range []string{"op_q_a", "op_q_b", "op_q_c"} {
		op := newOp(id, "svc-"+id)
		op.ProjectID, op.TargetBranch = 42, "main"
		create(t, s, op)
		advance(time.Second)
		// Each joins the queue one second after the one before, with its
		// step job scheduled an hour away (a waiting change's look).
		if _, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: id, ExpectStep: op.Step, ToStep: waiting,
			ToStatus: store.StatusMerging, Event: store.EventParams{Type: store.EventTransition, Actor: "changebot", Source: "job:x"},
			Jobs: []river.InsertManyParams{stepJob(id, waiting, 2, now.Add(time.Hour))}}); err != nil {
			t.Fatalf("queueing %s (%d): %v", id, i, err)
		}
		ids = append(ids, id)
	}
	q, err := s.GetQueue(ctx, s.DB(), key, waiting, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := waitingIDs(q); !slices.Equal(got, ids) {
		t.Fatalf("waiting %v, want %v (the order they became ready)", got, ids)
	}
	if err := s.MoveToQueueFront(ctx, "op_q_c", "token:ops", "hotfix"); err != nil {
		t.Fatal(err)
	}
	q, _ = s.GetQueue(ctx, s.DB(), key, waiting, 100)
	if got, want := waitingIDs(q), []string{"op_q_c", "op_q_a", "op_q_b"}; !slices.Equal(got, want) {
		t.Fatalf("waiting %v after the move to the front, want %v", got, want)
	}
	if q.Waiting[0].FrontBy != "token:ops" || q.Waiting[0].FrontAt.IsZero() {
		t.Errorf("front mark %q at %v, want token:ops with a time", q.Waiting[0].FrontBy, q.Waiting[0].FrontAt)
	}

	// Two replicas claim the head at once for different changes: one wins.
	var wg sync.WaitGroup
	won := make([]bool, 2)
	for i, st := range []store.Store{s, s2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := st.ClaimQueueHead(ctx, st.DB(), store.QueueHeadParams{Key: key, OperationID: ids[i]})
			if err != nil {
				t.Errorf("ClaimQueueHead: %v", err)
			}
			won[i] = ok
		}()
	}
	wg.Wait()
	if won[0] == won[1] {
		t.Fatalf("claims won %v, want exactly one", won)
	}
	holder, loser := ids[0], ids[1]
	if won[1] {
		holder, loser = ids[1], ids[0]
	}
	if ok, _ := s.ClaimQueueHead(ctx, s.DB(), store.QueueHeadParams{Key: key, OperationID: holder}); !ok {
		t.Errorf("the holder's claim again answered false, want true (idempotent)")
	}
	if _, released, _ := s.ReleaseQueueHead(ctx, s.DB(), key, loser, waiting, []string{"test_step"}, 1); released {
		t.Errorf("a change that does not hold the head gave it back")
	}
	q, _ = s.GetQueue(ctx, s.DB(), key, waiting, 100)
	if q.HeadOperationID != holder || q.HeadSince.IsZero() {
		t.Errorf("head %q since %v, want %s with a time", q.HeadOperationID, q.HeadSince, holder)
	}
	// A stale holder is replaced by a claim that names it.
	if ok, _ := s.ClaimQueueHead(ctx, s.DB(), store.QueueHeadParams{Key: key, OperationID: loser, Stale: "op_gone"}); ok {
		t.Errorf("a claim naming another stale holder took the head")
	}
	if ok, _ := s.ClaimQueueHead(ctx, s.DB(), store.QueueHeadParams{Key: key, OperationID: loser, Stale: holder}); !ok {
		t.Fatalf("a claim naming the holder as stale did not take the head")
	}
	holder = loser

	// Giving the head back wakes the first waiting change's job, and the
	// turn (40 s) is the queue's average turn, the first there was.
	advance(40 * time.Second)
	next, released, err := s.ReleaseQueueHead(ctx, s.DB(), key, holder, waiting, []string{"test_step"}, 1)
	if err != nil || !released {
		t.Fatalf("ReleaseQueueHead: released=%v err=%v", released, err)
	}
	if next != "op_q_c" {
		t.Errorf("woke %q, want op_q_c (moved to the front)", next)
	}
	if q, _ := s.GetQueue(ctx, s.DB(), key, waiting, 100); q.TurnAvg != 40*time.Second {
		t.Errorf("average turn %v after one turn of 40 s, want 40s", q.TurnAvg)
	}
	jobs, err := listJobs(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != len(ids) {
		t.Fatalf("%d jobs, want the %d waiting changes' looks", len(jobs), len(ids))
	}
	for _, j := range jobs {
		var args uniqueJob
		if err := json.Unmarshal(j.EncodedArgs, &args); err != nil {
			t.Fatal(err)
		}
		due := j.ScheduledAt.UTC().Sub(now) < time.Second
		if (args.OperationID == "op_q_c") != due {
			t.Errorf("job of %s due now: %v (scheduled %v, now %v)", args.OperationID, due, j.ScheduledAt.UTC(), now)
		}
	}

	// A second turn of 8 s weighs a quarter: (3 × 40 s + 8 s) / 4 = 32 s.
	if ok, _ := s.ClaimQueueHead(ctx, s.DB(), store.QueueHeadParams{Key: key, OperationID: "op_q_c"}); !ok {
		t.Fatal("the woken change could not take the free head")
	}
	advance(8 * time.Second)
	if _, released, _ := s.ReleaseQueueHead(ctx, s.DB(), key, "op_q_c", waiting, []string{"test_step"}, 1); !released {
		t.Fatal("the head's holder could not give it back")
	}
	if q, _ := s.GetQueue(ctx, s.DB(), key, waiting, 100); q.TurnAvg != 32*time.Second {
		t.Errorf("average turn %v after turns of 40 s and 8 s, want 32s", q.TurnAvg)
	}

	// Freeze: who and why; the first freeze is kept; unfreeze clears.
	f, err := s.FreezeQueue(ctx, key, true, "token:ops", "release freeze")
	if err != nil || !f.Frozen() || f.FrozenBy != "token:ops" || f.FrozenReason != "release freeze" {
		t.Fatalf("FreezeQueue: %+v, %v", f, err)
	}
	if f, _ = s.FreezeQueue(ctx, key, true, "@bob", "again"); f.FrozenBy != "token:ops" {
		t.Errorf("a second freeze replaced the first: frozen by %q", f.FrozenBy)
	}
	sums, err := s.ListQueues(ctx, s.DB(), store.PlatformGitLab, waiting)
	if err != nil || len(sums) != 1 || sums[0].WaitingCount != 3 || !sums[0].Frozen() {
		t.Fatalf("ListQueues: %+v, %v; want one frozen queue with 3 waiting", sums, err)
	}
	if other, _ := s.ListQueues(ctx, s.DB(), store.PlatformGitHub, waiting); len(other) != 0 {
		t.Errorf("GitHub's queues list GitLab's: %+v", other)
	}
	if f, _ = s.FreezeQueue(ctx, key, false, "@bob", "done"); f.Frozen() || f.FrozenBy != "" {
		t.Errorf("after unfreeze: %+v", f)
	}
	gh := key
	gh.Platform = store.PlatformGitHub
	if q, err := s.GetQueue(ctx, s.DB(), gh, waiting, 100); err != nil || len(q.Waiting) != 0 || q.HeadOperationID != "" {
		t.Errorf("GitHub's queue of the same numbers: %+v, %v; want empty", q, err)
	}
}

func waitingIDs(q store.Queue) []string {
	out := make([]string, len(q.Waiting))
	for i, w := range q.Waiting {
		out[i] = w.ID
	}
	return out
}

// listJobs lists the unfinished jobs (an implementation's Export).
func listJobs(ctx context.Context, s store.Store) ([]*rivertype.JobRow, error) {
	x, ok := s.(interface {
		Export(ctx context.Context) (*store.Snapshot, error)
	})
	if !ok {
		return nil, fmt.Errorf("%T has no Export", s)
	}
	snap, err := x.Export(ctx)
	if err != nil {
		return nil, err
	}
	return snap.Jobs, nil
}
