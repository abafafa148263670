package flows_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// robotWrites counts the writes any robot account made to the merge request
// or the repository after call index from: approve, merge, rebase, commit,
// and any PUT on the MR (a reopen is one).
func robotWrites(h *flowtest.Harness, from int) []string {
	var out []string
	for _, c := range h.GitLab.Calls()[from:] {
		if c.User == flowtest.Requester || c.User == "" {
			continue
		}
		switch {
		case c.Method == http.MethodPost && matches(pathApprove, c.Path),
			c.Method == http.MethodPut && matches(pathMerge, c.Path),
			c.Method == http.MethodPut && matches(pathMR+"/rebase", c.Path),
			c.Method == http.MethodPost && matches(pathCommits, c.Path),
			c.Method == http.MethodPut && matches(pathMR, c.Path):
			out = append(out, c.User+" "+c.Method+" "+c.Path)
		}
	}
	return out
}

// statusNote returns the newest note the robot wrote on op's MR.
func statusNote(t *testing.T, h *flowtest.Harness, id string) string {
	t.Helper()
	notes := h.MR(t, id).Notes
	for i := len(notes) - 1; i >= 0; i-- {
		if notes[i].Author == flowtest.Robot && !notes[i].System {
			return notes[i].Body
		}
	}
	t.Fatalf("no status comment on the MR of %s", id)
	return ""
}

// redelivered returns hooks with new delivery ids (GitLab resending the
// same events as new deliveries).
func redelivered(hooks []gitlabfake.SentWebhook) []gitlabfake.SentWebhook {
	out := make([]gitlabfake.SentWebhook, len(hooks))
	for i, w := range hooks {
		w.IdempotencyKey += "-again"
		out[i] = w
	}
	return out
}

// personPhase is a phase of the flow in which a person acts on the MR:
// reach drives a change there and returns it with the webhooks it held
// back (they arrive after the person acted).
type personPhase struct {
	name  string
	opts  *flowtest.Opts
	reach func(t *testing.T, h *flowtest.Harness) (store.Operation, []gitlabfake.SentWebhook)
	// find lets the flow find a person's act whose webhook was lost: the
	// step's own poll, or (a step that waits without one) one reconciler
	// pass and nothing else.
	find func(t *testing.T, h *flowtest.Harness)
	// mergeable, when set, makes the MR one GitLab lets a person merge
	// (the person fixes what blocks it first), its hooks lost too.
	mergeable func(t *testing.T, h *flowtest.Harness, op store.Operation)
	// lostOnly: only the lost-hook cases run (the delivered hook is the
	// same code in every step).
	lostOnly bool
}

// personPhases are the waits a change with an open MR spends time in: the
// MR pipeline wait (issue 10's input), the approval wait of the MR-first
// order (the MR is open, the pipeline passed), and every other step in
// which a change with an MR waits: for a pipeline past its deadline, for a
// fix after a failed pipeline, for a draft to be marked ready, for
// GitLab's merge check or rebase past their deadlines, for the approval
// system past its retries.
var personPhases = []personPhase{
	{name: "pipeline wait", find: findByPoll(flowtest.Poll.ShortInterval),
		reach: func(t *testing.T, h *flowtest.Harness) (store.Operation, []gitlabfake.SentWebhook) {
			op := h.ToMROpened(t, flowtest.Change("svc"))
			return op, h.TakeWebhooks(t)
		}},
	{name: "approval wait, MR first", find: findByReconciler,
		reach: func(t *testing.T, h *flowtest.Harness) (store.Operation, []gitlabfake.SentWebhook) {
			p := flowtest.Change("svc")
			p.ApprovalFirst = false
			op := h.ToMROpened(t, p)
			hooks := h.DeliverWebhooks(t)
			h.WorkUntilIdle(t)
			h.RequireStep(t, op.ID, rules.ApprovalSent)
			return op, hooks
		}},
	{name: "approval request pending, MR first", find: findByReconciler, lostOnly: true,
		reach: func(t *testing.T, h *flowtest.Harness) (store.Operation, []gitlabfake.SentWebhook) {
			p := flowtest.Change("svc")
			p.ApprovalFirst = false
			op := h.ToMROpened(t, p)
			h.Approvals.FailNext(1 << 20)
			hooks := h.DeliverWebhooks(t)
			h.RunUntil(t, op.ID, rules.ApprovalSendPending, 24*time.Hour)
			return op, hooks
		}},
	{name: "pipeline pending (waits for a manual job)", find: findByReconciler, lostOnly: true,
		reach: func(t *testing.T, h *flowtest.Harness) (store.Operation, []gitlabfake.SentWebhook) {
			h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"manual"}})
			op := h.ToMROpened(t, flowtest.Change("svc"))
			h.RunUntil(t, op.ID, rules.CreatePipelinePending, flowtest.Poll.PipelineDeadline+flowtest.Poll.LongInterval)
			return op, h.TakeWebhooks(t)
		}},
	{name: "pipeline failed", find: findByReconciler, lostOnly: true,
		reach: func(t *testing.T, h *flowtest.Harness) (store.Operation, []gitlabfake.SentWebhook) {
			h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed", "success"}})
			op := h.ToMROpened(t, flowtest.Change("svc"))
			hooks := h.DeliverWebhooks(t)
			h.WorkUntilIdle(t)
			h.RequireStep(t, op.ID, rules.CreatePipelineFailed)
			return op, hooks
		},
		mergeable: func(t *testing.T, h *flowtest.Harness, op store.Operation) {
			// The person pushes a fix; its pipeline passes.
			h.GitLab.Push(h.Project.ID, h.MR(t, op.ID).SourceBranch, flowtest.Requester, "Fix", map[string]string{"fix.txt": "fixed\n"})
		}},
	{name: "draft wait", find: findByPoll(flowtest.Poll.LongInterval), lostOnly: true,
		reach: func(t *testing.T, h *flowtest.Harness) (store.Operation, []gitlabfake.SentWebhook) {
			id := toDraft(t, h)
			return h.Op(t, id), h.TakeWebhooks(t)
		},
		mergeable: func(t *testing.T, h *flowtest.Harness, op store.Operation) {
			setTitle(t, h, op.ID, flowtest.Requester, strings.TrimPrefix(h.MR(t, op.ID).Title, "Draft: "))
		}},
	{name: "merge check pending", find: findByReconciler, lostOnly: true,
		reach: func(t *testing.T, h *flowtest.Harness) (store.Operation, []gitlabfake.SentWebhook) {
			op := h.ToMROpened(t, flowtest.Change("svc"))
			h.GitLab.SetMergeBlock(h.Project.ID, op.MRIID, gitlabfake.MergeBlock{DetailedMergeStatus: "checking"})
			h.DeliverWebhooks(t)
			h.RunUntil(t, op.ID, rules.HandleMergePending, time.Hour)
			return op, h.TakeWebhooks(t)
		},
		mergeable: func(t *testing.T, h *flowtest.Harness, op store.Operation) {
			h.GitLab.SetMergeBlock(h.Project.ID, op.MRIID, gitlabfake.MergeBlock{}) // GitLab is done checking
		}},
	{name: "rebase pending", find: findByReconciler, lostOnly: true,
		opts: &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: "ff"}, Configure: noDeferCI},
		reach: func(t *testing.T, h *flowtest.Harness) (store.Operation, []gitlabfake.SentWebhook) {
			op := h.ToMROpened(t, flowtest.Change("svc"))
			h.GitLab.SetRebaseBehavior(h.Project.ID, op.MRIID, gitlabfake.RebaseBehavior{StuckForever: true})
			h.GitLab.PushToTarget(h.Project.ID, "main")
			h.DeliverWebhooks(t)
			h.RunUntil(t, op.ID, rules.HandleRebasePending, time.Hour)
			return op, h.TakeWebhooks(t)
		},
		mergeable: func(t *testing.T, h *flowtest.Harness, op store.Operation) {
			h.GitLab.FinishRebase(h.Project.ID, op.MRIID) // the new head's pipeline passes at once
		}},
}

// findByPoll finds a lost act on the step's poll, due after interval.
func findByPoll(interval time.Duration) func(t *testing.T, h *flowtest.Harness) {
	return func(t *testing.T, h *flowtest.Harness) {
		t.Helper()
		h.Advance(interval)
		h.WorkUntilIdle(t)
	}
}

// findByReconciler runs one reconciler pass and the jobs due now: a change
// that waits without a poll must learn of a lost close or merge there.
func findByReconciler(t *testing.T, h *flowtest.Harness) {
	t.Helper()
	if _, err := flows.NewReconciler(h.Engine, h.Store, flows.ReconcileConfig{}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.WorkUntilIdle(t)
}

// TestPersonClosesMR is issue 10 point 1: the change waits for its MR
// pipeline, a person closes the MR; the change ends in MR_CLOSED naming
// who, on the hook or (hook lost) on the pipeline wait's next poll; the
// pipeline's success hooks replayed and redelivered, and two reconciler
// passes, move nothing; no robot writes to the MR afterwards; the status
// comment says who closed it.
func TestPersonClosesMR(t *testing.T) {
	type tcase struct {
		name     string
		phase    personPhase
		loseHook bool
	}
	var cases []tcase
	for _, ph := range personPhases {
		if !ph.lostOnly {
			cases = append(cases, tcase{name: ph.name + ", close hook delivered", phase: ph})
		}
		cases = append(cases, tcase{name: ph.name + ", close hook lost", phase: ph, loseHook: true})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := flowtest.New(t, tc.phase.opts)
			op, pipelineHooks := tc.phase.reach(t, h)
			from := len(h.GitLab.Calls())
			if _, err := h.ClientAs(t, flowtest.Requester).CloseMergeRequest(context.Background(), h.Project.ID, op.MRIID); err != nil {
				t.Fatal(err)
			}
			closeHooks := h.TakeWebhooks(t)
			if tc.loseHook {
				tc.phase.find(t, h)
			} else {
				if !strings.Contains(flowtest.Describe(closeHooks), "close") {
					t.Fatalf("no close hook: %s", flowtest.Describe(closeHooks))
				}
				h.Deliver(t, closeHooks...)
			}
			h.WorkUntilIdle(t)
			h.RequireStep(t, op.ID, rules.ClosedByPerson)
			wantDetail(t, h, op.ID, flowtest.Requester+" closed merge request")

			h.Deliver(t, pipelineHooks...)
			h.Deliver(t, pipelineHooks...)
			h.Deliver(t, redelivered(pipelineHooks)...)
			h.WorkUntilIdle(t)
			if op.ApprovalFirst {
				// The approval system's decision is late too.
			} else if res := h.Decide(t, op.ID, rules.DecisionApproved); res == rules.ResultAccepted {
				t.Fatalf("an approval after the close was %s", res)
			}
			h.WorkUntilIdle(t)
			for range 2 { // two reconciler and two sweeper passes, past sweeper.after
				h.Advance(flows.DefaultSweepConfig.After + time.Minute)
				if _, err := flows.NewReconciler(h.Engine, h.Store, flows.ReconcileConfig{}).Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				if _, err := flows.NewSweeper(h.Engine, h.Store, flows.SweepConfig{}).Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				h.WorkUntilIdle(t)
			}
			h.RequireStep(t, op.ID, rules.ClosedByPerson)
			if w := robotWrites(h, from); len(w) > 0 {
				t.Fatalf("robot writes after the close: %v", w)
			}
			if mr := h.MR(t, op.ID); mr.State != platform.MRStateClosed {
				t.Fatalf("MR state %s, want closed", mr.State)
			}
			if note := statusNote(t, h, op.ID); !strings.Contains(note, flowtest.Requester+" closed merge request") {
				t.Fatalf("status comment does not say who closed the MR:\n%s", note)
			}
			wantBinding(t, h, op.ID, store.StatusClosed) // a closed binding: a new change may start
			h.Submit(t, flowtest.Change("svc"))
		})
	}
}

// TestPersonMergesMR is issue 10 point 2: a person merges the MR while the
// change waits for its pipeline; the change goes on to the deploy wait with
// GitLab's merge commit and says who merged it (event and status comment),
// with no approve, merge or rebase afterwards, also when the source branch
// was deleted.
func TestPersonMergesMR(t *testing.T) {
	type tcase struct {
		name         string
		phase        personPhase
		loseHook     bool
		deleteBranch bool
	}
	var cases []tcase
	for _, ph := range personPhases {
		if !ph.lostOnly {
			cases = append(cases, tcase{name: ph.name + ", merge hook delivered", phase: ph},
				tcase{name: ph.name + ", source branch deleted", phase: ph, deleteBranch: true},
				tcase{name: ph.name + ", source branch deleted, hook lost", phase: ph, deleteBranch: true, loseHook: true})
		}
		cases = append(cases, tcase{name: ph.name + ", merge hook lost", phase: ph, loseHook: true})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := flowtest.New(t, tc.phase.opts)
			op, pipelineHooks := tc.phase.reach(t, h)
			if tc.phase.mergeable != nil {
				tc.phase.mergeable(t, h, op)
			}
			from := len(h.GitLab.Calls())
			person := h.ClientAs(t, flowtest.Requester)
			merged, err := person.Merge(context.Background(), h.Project.ID, op.MRIID, platform.MergeParams{SHA: h.MR(t, op.ID).SHA})
			if err != nil {
				t.Fatal(err)
			}
			if tc.deleteBranch {
				// The MR may have removed it already (remove_source_branch).
				if err := person.DeleteBranch(context.Background(), h.Project.ID, merged.SourceBranch); err != nil && !errors.Is(err, platform.ErrNotFound) {
					t.Fatal(err)
				}
				if _, err := person.Branch(context.Background(), h.Project.ID, merged.SourceBranch); !errors.Is(err, platform.ErrNotFound) {
					t.Fatalf("reading the deleted source branch: %v, want 404", err)
				}
			}
			mergeHooks := h.TakeWebhooks(t)
			if tc.loseHook {
				tc.phase.find(t, h)
			} else {
				h.Deliver(t, mergeHooks...)
			}
			h.WorkUntilIdle(t)
			// Merged before any late pipeline hook reads the MR (the
			// delivered hooks may hold the deploy pipeline's too).
			if s := rules.StepCode(h.Op(t, op.ID).Step); s != rules.HandleMerged && s != rules.CalledBack {
				t.Fatalf("step %s once the merge was found, want HANDLE_MERGED or CALLED_BACK", s)
			}
			h.Deliver(t, pipelineHooks...)
			h.WorkUntilIdle(t)
			h.RunFor(t, time.Minute) // the status comment catches up
			wantSteps(t, h, op.ID, rules.CreateMROpened, rules.HandleMerged)
			got := h.Op(t, op.ID)
			if s := rules.StepCode(got.Step); s != rules.HandleMerged && s != rules.CalledBack {
				t.Fatalf("step %s after the merge, want HANDLE_MERGED or (the deploy pipeline passed) CALLED_BACK", s)
			}
			want := h.MR(t, op.ID)
			if commit := want.MergeCommitSHA; commit != "" && got.MergeCommitSHA != commit {
				t.Fatalf("merge commit %q, want GitLab's %q", got.MergeCommitSHA, commit)
			}
			if rules.StepCode(got.Step) == rules.HandleMerged {
				wantDetail(t, h, op.ID, flowtest.Requester+" merged")
			}
			found := false
			for _, ev := range h.Events(t, op.ID) {
				var payload map[string]any
				if rules.StepCode(ev.ToStep) == rules.HandleMerged && ev.Actor == flowtest.Requester &&
					json.Unmarshal(ev.Payload, &payload) == nil && payload["merged_by"] == flowtest.Requester {
					found = true
				}
			}
			if !found {
				t.Fatalf("no HANDLE_MERGED event names %s as who merged", flowtest.Requester)
			}
			if note := statusNote(t, h, op.ID); !strings.Contains(note, "| merged by "+flowtest.Requester+" | ") {
				t.Fatalf("status comment does not say who merged the MR:\n%s", note)
			}
			if w := robotWrites(h, from); len(w) > 0 {
				t.Fatalf("robot writes after the merge: %v", w)
			}
		})
	}
}

// TestPersonActsOnASettledGitLab: a person's call through the harness
// (ClientAs) comes after the fake GitLab's work of an earlier act, as at a
// moment of harness time: the merge right after FinishRebase, whose new
// head's pipeline the fake runs on real-time timers (here for 300ms), is
// accepted, not refused with 405 ci_still_running (the race behind a flaky
// "rebase pending, merge hook lost").
func TestPersonActsOnASettledGitLab(t *testing.T) {
	t.Parallel()
	ph := personPhases[len(personPhases)-1]
	if ph.name != "rebase pending" {
		t.Fatalf("last person phase is %q, want rebase pending", ph.name)
	}
	h := flowtest.New(t, ph.opts)
	op, _ := ph.reach(t, h)
	h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{Duration: 300 * time.Millisecond})
	h.GitLab.FinishRebase(h.Project.ID, op.MRIID)
	snap, _ := h.GitLab.MergeRequest(h.Project.ID, op.MRIID) // no settling: what GitLab shows at once
	if snap.DetailedMergeStatus != "ci_still_running" {
		t.Fatalf("right after the rebase the MR is %s, want ci_still_running (the test no longer shows the race)", snap.DetailedMergeStatus)
	}
	merged, err := h.ClientAs(t, flowtest.Requester).Merge(context.Background(), h.Project.ID, op.MRIID, platform.MergeParams{SHA: snap.SHA})
	if err != nil {
		t.Fatalf("the person's merge after the rebase: %v", err)
	}
	if merged.State != platform.MRStateMerged {
		t.Fatalf("MR %s after the merge, want merged", merged.State)
	}
}

// TestReconcilerWatchIsBounded: the reconciler reads the MR of each change
// waiting without a poll once per pass, at most MaxWatches per pass, going
// on where the last pass stopped; a close whose hook was lost is found on
// the pass that reads its MR.
func TestReconcilerWatchIsBounded(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	var ops []store.Operation
	for _, subject := range []string{"a", "b", "c"} {
		p := flowtest.Change(subject)
		p.ApprovalFirst = false
		op := h.ToMROpened(t, p)
		h.DeliverWebhooks(t)
		h.WorkUntilIdle(t)
		ops = append(ops, h.RequireStep(t, op.ID, rules.ApprovalSent))
	}
	last := ops[0]
	for _, op := range ops {
		if op.ID > last.ID {
			last = op
		}
	}
	if _, err := h.ClientAs(t, flowtest.Requester).CloseMergeRequest(context.Background(), h.Project.ID, last.MRIID); err != nil {
		t.Fatal(err)
	}
	h.TakeWebhooks(t) // the close hook is lost
	rec := flows.NewReconciler(h.Engine, h.Store, flows.ReconcileConfig{MaxWatches: 2})
	for i, want := range []int{2, 1, 2} { // the third starts over without the closed one
		before := calls(h, http.MethodGet, pathMR, flowtest.Robot, true)
		rep, err := rec.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		h.WorkUntilIdle(t)
		if got := calls(h, http.MethodGet, pathMR, flowtest.Robot, true) - before; got != want || rep.Watched != want {
			t.Fatalf("pass %d read %d merge requests (report %d), want %d", i+1, got, rep.Watched, want)
		}
		if i == 1 {
			h.RequireStep(t, last.ID, rules.ClosedByPerson)
		}
	}
}
