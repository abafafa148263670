package flows_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/approval"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
	"changebot/templates"
)

type setup struct {
	engine *flows.Engine
	store  *postgres.Store
	sc     pgtest.Schema
}

func newSetup(t *testing.T) setup {
	t.Helper()
	flowtest.SkipOnSQLite(t, "builds its PostgreSQL store itself (pgtest, pgx transactions)")
	sc := pgtest.New(t)
	st, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	fake := gitlabfake.New(gitlabfake.Options{})
	t.Cleanup(fake.Close)
	fake.AddUser("robot", "tok")
	// Submit checks the project and its branch in GitLab (issue 9 defect 16).
	fake.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "g/r", Members: map[string]int{"robot": gitlabfake.AccessMaintainer}})
	gl, err := gitlab.New(gitlab.Config{BaseURL: fake.URL(), Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := templates.NewRenderer(nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := flows.NewEngine(flows.EngineConfig{Store: st, Adapter: gl, Renderer: r,
		Approvals: approval.New("http://127.0.0.1:1", nil)})
	if err != nil {
		t.Fatal(err)
	}
	return setup{engine: e, store: st, sc: sc}
}

func submit(t *testing.T, s setup, subject string) store.Operation {
	t.Helper()
	op, created, err := s.engine.Submit(context.Background(), flows.SubmitParams{SubjectID: subject, TargetKey: "prod",
		Project: "g/r", Title: "t", RequestedBy: "alice", ApprovalFirst: true,
		Files: []store.File{{Path: "a.yaml", Content: "a: 1"}}})
	if err != nil || !created {
		t.Fatalf("Submit: %v", err)
	}
	return op
}

// walk moves op along steps with the engine's one transition function.
func walk(t *testing.T, s setup, op store.Operation, steps ...rules.StepCode) store.Operation {
	t.Helper()
	for _, to := range steps {
		var err error
		op, err = s.engine.Transition(context.Background(), op, to, flows.TransitionOpts{Source: "test"})
		if err != nil {
			t.Fatalf("moving to %s: %v", to, err)
		}
	}
	return op
}

type snapshot struct {
	Op      store.Operation
	Binding store.Binding
	Events  int
	Jobs    int
}

func snap(t *testing.T, s setup, op store.Operation) snapshot {
	t.Helper()
	ctx := context.Background()
	o, err := s.store.GetOperation(ctx, s.store.DB(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.store.GetBinding(ctx, s.store.DB(), op.SubjectID, op.TargetKey)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := s.store.ListEvents(ctx, s.store.DB(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	var jobs int
	if err := s.sc.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	return snapshot{o, b, len(ev), jobs}
}

func TestIllegalTransitionLeavesEveryRowUnchanged(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	tests := []struct {
		name string
		path []rules.StepCode
		to   rules.StepCode
	}{
		{"VALIDATED -> MERGING", []rules.StepCode{rules.ApprovalSent, rules.CreateStarted, rules.CreateMROpened,
			rules.CreateSucceeded, rules.HandleStarted, rules.HandleApproved, rules.HandleMerged, rules.CalledBack}, rules.HandleStarted},
		{"CREATE_FAILED -> VALIDATED", []rules.StepCode{rules.ApprovalSent, rules.CreateStarted, rules.CreateFailed}, rules.CalledBack},
		{"APPROVAL_SENT -> DEPLOY_PENDING", []rules.StepCode{rules.ApprovalSent}, rules.DeployPending},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := walk(t, s, submit(t, s, "svc"+string(rune('a'+i))), tt.path...)
			before := snap(t, s, op)
			_, err := s.engine.Transition(context.Background(), op, tt.to, flows.TransitionOpts{Source: "test"})
			if !errors.Is(err, rules.ErrIllegalTransition) {
				t.Fatalf("got %v, want ErrIllegalTransition", err)
			}
			if after := snap(t, s, op); !reflect.DeepEqual(before, after) {
				t.Fatalf("rows changed by a refused transition:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

// TestStaleVersionIsRefused: a writer that read an older version loses,
// and exactly one of several concurrent writers wins.
func TestConcurrentTransitionsOneWins(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	op := submit(t, s, "race")
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.engine.Transition(context.Background(), op, rules.ApprovalSent, flows.TransitionOpts{Source: "test"})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, store.ErrVersionConflict), errors.Is(err, store.ErrStepMismatch):
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d writers won, want 1", wins.Load())
	}
}

// TestApprovalCallbackGuard covers DESIGN §3 step 3: unknown, duplicate,
// stale (binding re-applied), not awaiting, and accepted while SENDING.
func TestApprovalCallbackGuard(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	// Accepted while APPROVAL_SENDING (the SENT write has not happened).
	op := submit(t, s, "early")
	res, err := s.engine.AcceptApproval(ctx, rules.ApprovalCallback{RequestID: "r1", OperationID: op.ID, Decision: "approved", Approver: "carol"})
	if err != nil || res != rules.ResultAccepted {
		t.Fatalf("early callback: %s %v", res, err)
	}
	got, _ := s.store.GetOperation(ctx, s.store.DB(), op.ID)
	if rules.StepCode(got.Step) != rules.CreateStarted {
		t.Fatalf("step after approval = %s", rules.StepCode(got.Step))
	}
	if res, _ := s.engine.AcceptApproval(ctx, rules.ApprovalCallback{RequestID: "r1", OperationID: op.ID, Decision: "approved"}); res != rules.ResultDuplicate {
		t.Fatalf("repeat: %s", res)
	}
	if res, _ := s.engine.AcceptApproval(ctx, rules.ApprovalCallback{RequestID: "r2", OperationID: op.ID, Decision: "rejected"}); res != rules.ResultIgnoredStale {
		t.Fatalf("not awaiting: %s", res)
	}
	if res, _ := s.engine.AcceptApproval(ctx, rules.ApprovalCallback{RequestID: "r3", OperationID: "op_nope", Decision: "approved"}); res != rules.ResultIgnoredUnknown {
		t.Fatalf("unknown: %s", res)
	}
	// Stale: the operation awaits a decision but no longer owns its
	// binding. The binding was re-applied to a fresh change after the old
	// one was rejected; the old one's row is then put back to APPROVAL_SENT
	// as a read made before the rejection saw it, so that only the binding
	// check stands between the callback and a transition (with a rejected
	// change the not-awaiting check would answer first: issue 21.15).
	old := submit(t, s, "reapplied")
	old = walk(t, s, old, rules.ApprovalSent, rules.ApprovalRejected)
	fresh := submit(t, s, "reapplied")
	sent := rules.MustStep(rules.ApprovalSent)
	if _, err := s.sc.Pool.Exec(ctx, `UPDATE operations SET step = $1, status = $2 WHERE id = $3`,
		int(rules.ApprovalSent), sent.Status, old.ID); err != nil {
		t.Fatal(err)
	}
	if b, err := s.store.GetBinding(ctx, s.store.DB(), "reapplied", "prod"); err != nil || b.OperationID != fresh.ID {
		t.Fatalf("binding %+v %v, want it owned by the fresh change %s", b, err, fresh.ID)
	}
	before := snap(t, s, old)
	freshBefore := snap(t, s, fresh)
	if res, err := s.engine.AcceptApproval(ctx, rules.ApprovalCallback{RequestID: "r4", OperationID: old.ID, Decision: "approved", Approver: "carol"}); err != nil || res != rules.ResultIgnoredStale {
		t.Fatalf("re-applied binding: %s %v, want IGNORED_STALE", res, err)
	}
	if after := snap(t, s, old); !reflect.DeepEqual(before, after) {
		t.Fatalf("a stale callback changed the old change's rows")
	}
	if after := snap(t, s, fresh); !reflect.DeepEqual(freshBefore, after) {
		t.Fatalf("a stale callback changed the fresh change's rows")
	}
}

// TestApprovalCallbackCannotSteerTheFlow: a signed callback that names
// another ticket or none (once the change holds one), or an MR the operation does not have, is stale and
// changes nothing; the operation's own state decides the flow order.
func TestApprovalCallbackCannotSteerTheFlow(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	ctx := context.Background()
	op := submit(t, s, "steer")
	op, err := s.engine.Transition(ctx, op, rules.ApprovalSent, flows.TransitionOpts{Source: "test",
		Update: func(o *store.Operation) { o.TicketID = "T-1" }})
	if err != nil {
		t.Fatal(err)
	}
	before := snap(t, s, op)
	tests := []struct {
		name string
		cb   rules.ApprovalCallback
	}{
		{"another ticket", rules.ApprovalCallback{RequestID: "s1", OperationID: op.ID, TicketID: "NOT-MINE", Decision: "approved"}},
		{"no ticket once one is recorded", rules.ApprovalCallback{RequestID: "s0", OperationID: op.ID, Decision: "approved"}},
		{"an MR the operation does not have", rules.ApprovalCallback{RequestID: "s2", OperationID: op.ID, TicketID: "T-1", Decision: "approved", Ext: map[string]any{"mr_iid": float64(999)}}},
	}
	for _, tt := range tests {
		res, err := s.engine.AcceptApproval(ctx, tt.cb)
		if err != nil || res != rules.ResultIgnoredStale {
			t.Fatalf("%s: %s %v, want IGNORED_STALE", tt.name, res, err)
		}
	}
	if after := snap(t, s, op); !reflect.DeepEqual(before, after) {
		t.Fatalf("a stale callback changed rows")
	}
	res, err := s.engine.AcceptApproval(ctx, rules.ApprovalCallback{RequestID: "s3", OperationID: op.ID, TicketID: "T-1", Decision: "approved"})
	if err != nil || res != rules.ResultAccepted {
		t.Fatalf("the matching callback: %s %v", res, err)
	}
	got, _ := s.store.GetOperation(ctx, s.store.DB(), op.ID)
	if rules.StepCode(got.Step) != rules.CreateStarted {
		t.Fatalf("approval-first change went to %s, want CREATE_STARTED", rules.StepCode(got.Step))
	}
}
