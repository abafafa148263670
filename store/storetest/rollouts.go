package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"changebot/store"
)

// rolloutArgs is a stand-in rollout notification job.
type rolloutArgs struct {
	RolloutID string `json:"rollout_id"`
	State     string `json:"state"`
	Notice    int64  `json:"notice"`
}

func (rolloutArgs) Kind() string { return "test_rollout_notice" }

// allAt is a RolloutNotice whose state is "at-<step>" once every change of
// the rollout is at one step, and "" (nothing to tell) before; each new
// state is one rolloutArgs job numbered by the mark. seen, when set,
// receives each rollout Decide was given.
func allAt(seen func(store.Rollout)) *store.RolloutNotice {
	return &store.RolloutNotice{Lists: [][]int{{10402}}, ListLimit: 10,
		Decide: func(r store.Rollout, last store.RolloutMark, op store.Operation, _ store.Event) (string, []river.InsertManyParams) {
			if seen != nil {
				seen(r)
			}
			if len(r.Counts) == 0 {
				return "", nil
			}
			step := r.Counts[0].Step
			for _, c := range r.Counts {
				if c.Step != step {
					return "", nil
				}
			}
			state := fmt.Sprintf("at-%d", step)
			return state, []river.InsertManyParams{{Args: rolloutArgs{RolloutID: op.RolloutID, State: state, Notice: last.Notices + 1}}}
		}}
}

// rolloutJobs lists the stand-in rollout jobs waiting in s.
func rolloutJobs(t *testing.T, s store.Store) []rolloutArgs {
	t.Helper()
	jobs, err := listJobs(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	var out []rolloutArgs
	for _, j := range jobs {
		if j.Kind == (rolloutArgs{}).Kind() {
			var a rolloutArgs
			if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
				t.Fatal(err)
			}
			out = append(out, a)
		}
	}
	return out
}

// testRollouts (issue 25 point 3): operations carry their rollout id;
// ReadRollout aggregates a rollout by project, status and step, with the
// first creation and last update, lists the changes at the asked steps,
// and answers ErrNotFound for an id no change has; ListChanges filters by
// rollout; and a transition's RolloutNotice sees the rollout as the move
// leaves it, records a new state once (its jobs enqueued with the move)
// and drops the jobs of a state already told, also after the rollout left
// it and came back.
func testRollouts(t *testing.T, open Open) {
	ctx := context.Background()
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	s := open(t)(Opts{NowFunc: func() time.Time { return now }})
	var ops []store.Operation
	for i, project := range []string{"g/r", "g/r", "g/other"} {
		op := newOp(fmt.Sprintf("op_ro_%d", i), fmt.Sprintf("svc-ro-%d", i))
		op.RolloutID, op.Project, op.ProjectID = "ro-1", project, int64(40+len(project))
		ops = append(ops, create(t, s, op))
		now = now.Add(time.Second)
	}
	create(t, s, newOp("op_ro_none", "svc-ro-none"))

	if got, err := s.GetOperation(ctx, s.DB(), ops[0].ID); err != nil || got.RolloutID != "ro-1" {
		t.Fatalf("GetOperation: rollout %q, %v; want ro-1", got.RolloutID, err)
	}
	listed, err := s.ListChanges(ctx, s.DB(), store.ListParams{RolloutID: "ro-1", Limit: 10})
	if err != nil || len(listed) != 3 {
		t.Fatalf("ListChanges of ro-1: %d changes, %v; want 3", len(listed), err)
	}
	if _, err := s.ReadRollout(ctx, s.DB(), store.RolloutReadParams{ID: "ro-none"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ReadRollout of an unknown id: %v, want ErrNotFound", err)
	}

	move := func(op store.Operation, to int, status string) store.Operation {
		t.Helper()
		now = now.Add(time.Second)
		moved, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: op.ID, ExpectStep: op.Step, ToStep: to, ToStatus: status,
			Event: store.EventParams{Type: store.EventTransition, Actor: "changebot", Source: "job:x"}, Rollout: allAt(nil)})
		if err != nil {
			t.Fatalf("moving %s to %d: %v", op.ID, to, err)
		}
		return moved
	}
	ops[0] = move(ops[0], 10402, store.StatusApprovalSent)
	r, err := s.ReadRollout(ctx, s.DB(), store.RolloutReadParams{ID: "ro-1", Lists: [][]int{{10401}, {10402}}, ListLimit: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"g/other 10401": 1, "g/r 10401": 1, "g/r 10402": 1}
	got := map[string]int{}
	for _, c := range r.Counts {
		got[fmt.Sprintf("%s %d", c.Project, c.Step)] += c.Count
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || r.Total() != 3 {
		t.Fatalf("rollout counts %v (total %d), want %v", got, r.Total(), want)
	}
	// The first group first, oldest update first, cut at the limit.
	if len(r.Listed) != 2 || r.Listed[0].ID != ops[1].ID || r.Listed[1].ID != ops[2].ID {
		t.Fatalf("rollout listed %+v, want %s and %s (10401, oldest first; the limit leaves 10402 out)", r.Listed, ops[1].ID, ops[2].ID)
	}
	r, err = s.ReadRollout(ctx, s.DB(), store.RolloutReadParams{ID: "ro-1", Lists: [][]int{{10402}, {10401}}, ListLimit: 10})
	if err != nil || len(r.Listed) != 3 || r.Listed[0].ID != ops[0].ID {
		t.Fatalf("rollout listed %+v (%v), want %s first, then the two at 10401", r.Listed, err, ops[0].ID)
	}
	first := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	if !r.FirstCreatedAt().Equal(first) || !r.LastUpdatedAt().Equal(now) {
		t.Fatalf("rollout times %s .. %s, want %s .. %s", r.FirstCreatedAt(), r.LastUpdatedAt(), first, now)
	}
	if jobs := rolloutJobs(t, s); len(jobs) != 0 {
		t.Fatalf("a move that leaves the rollout at no new state enqueued %v", jobs)
	}

	ops[1] = move(ops[1], 10402, store.StatusApprovalSent)
	ops[2] = move(ops[2], 10402, store.StatusApprovalSent)
	jobs := rolloutJobs(t, s)
	if len(jobs) != 1 || jobs[0] != (rolloutArgs{RolloutID: "ro-1", State: "at-10402", Notice: 1}) {
		t.Fatalf("after every change reached 10402: jobs %v, want one notice 1 at-10402", jobs)
	}
	// Leaving the state and coming back tells nothing again.
	ops[2] = move(ops[2], 10401, store.StatusApprovalSending)
	ops[2] = move(ops[2], 10402, store.StatusApprovalSent)
	if jobs := rolloutJobs(t, s); len(jobs) != 1 {
		t.Fatalf("a state already told was told again: %v", jobs)
	}
	// A change without a rollout never calls Decide.
	none, err := s.GetOperation(ctx, s.DB(), "op_ro_none")
	if err != nil {
		t.Fatal(err)
	}
	called := false
	if _, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: none.ID, ExpectStep: none.Step, ToStep: 10402,
		ToStatus: store.StatusApprovalSent, Event: store.EventParams{Type: store.EventTransition, Actor: "changebot", Source: "job:x"},
		Rollout: allAt(func(store.Rollout) { called = true })}); err != nil || called {
		t.Fatalf("moving a change without a rollout: Decide called %v, %v", called, err)
	}
}

// testRolloutNoticeConcurrent: the changes of one rollout moved at once
// from two replicas on one database tell the rollout's final state
// exactly once. Each move reads the rollout after the lock on its row, so
// the last move sees every other one (two moves that read before the
// lock could each see the other one missing, and tell nothing).
func testRolloutNoticeConcurrent(t *testing.T, open Open) {
	ctx := context.Background()
	db := open(t)
	replicas := []store.Store{db(Opts{}), db(Opts{})}
	const n = 16
	var ops []store.Operation
	for i := range n {
		op := newOp(fmt.Sprintf("op_roc_%02d", i), fmt.Sprintf("svc-roc-%02d", i))
		op.RolloutID = "ro-c"
		ops = append(ops, create(t, replicas[0], op))
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := replicas[i%2].ApplyTransition(ctx, store.TransitionParams{OperationID: op.ID, ExpectStep: op.Step,
				ToStep: 10402, ToStatus: store.StatusApprovalSent,
				Event:   store.EventParams{Type: store.EventTransition, Actor: "changebot", Source: "job:x"},
				Rollout: allAt(nil)})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if jobs := rolloutJobs(t, replicas[1]); len(jobs) != 1 || jobs[0] != (rolloutArgs{RolloutID: "ro-c", State: "at-10402", Notice: 1}) {
		t.Fatalf("%d concurrent moves to one state told %v, want it once", n, jobs)
	}
}
