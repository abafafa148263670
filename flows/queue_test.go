package flows_test

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// driveAll delivers webhooks and works jobs, advancing the harness clock to
// each next due job, until every change of ids is merged (MERGED or VALIDATED) or
// limit of harness time has passed. It returns the operations.
func driveAll(t *testing.T, h *flowtest.Harness, ids []string, limit time.Duration) []store.Operation {
	t.Helper()
	end := h.Now().Add(limit)
	for {
		h.DeliverWebhooks(t)
		h.WorkUntilIdle(t)
		h.DeliverWebhooks(t)
		h.WorkUntilIdle(t)
		ops := make([]store.Operation, len(ids))
		done := true
		for i, id := range ids {
			ops[i] = h.Op(t, id)
			if ops[i].Status != store.StatusMerged && ops[i].Status != store.StatusValidated {
				done = false
			}
		}
		next, ok := h.NextDue(t)
		if done || !ok || h.Now().Add(next).After(end) {
			return ops
		}
		h.Advance(max(next, time.Millisecond))
	}
}

// submitApproved submits k changes (svc-0 … svc-<k-1>) to h's project,
// works their first jobs and approves each, returning their ids: the
// burst of approved changes the queue tests start from.
func submitApproved(t *testing.T, h *flowtest.Harness, k int) []string {
	t.Helper()
	var ids []string
	for i := range k {
		ids = append(ids, h.Submit(t, flowtest.Change(fmt.Sprintf("svc-%d", i))).ID)
	}
	h.WorkUntilIdle(t)
	for _, id := range ids {
		if res := h.Decide(t, id, rules.DecisionApproved); res != rules.ResultAccepted {
			t.Fatalf("approving %s: %s", id, res)
		}
	}
	return ids
}

// noDeferCI configures the queue with queue.defer_ci off: the tests that
// take changes to CREATE_MR_OPENED (their first pipeline's wait) or script
// the pipelines in creation order are about the queue without deferred
// pipelines (TestMergeQueueDefersCI is the one with them).
func noDeferCI(cfg *flows.EngineConfig) {
	cfg.QueueFunc = func(string) flows.QueueConfig {
		return flows.QueueConfig{Mode: rules.QueueAuto, PipelineRetries: 1, DeferCI: rules.DeferCIOff}
	}
}

// countSteps counts how often operation id entered step.
func countSteps(t *testing.T, h *flowtest.Harness, id string, step rules.StepCode) int {
	n := 0
	for _, s := range h.Steps(t, id) {
		if s == step {
			n++
		}
	}
	return n
}

// TestMergeQueueSerialisesUpToDateMerges (issue 22 points 2, 3 and 7): K
// changes approved at once for one branch of a project whose merge method
// needs an up-to-date merge request (ff, rebase_merge) wait in the
// branch's merge queue: only its head is rebased, so every change merges,
// none fails for another one's merge, and no change is rebased more than
// once. With the plain merge method, or queue.mode off, they merge in
// parallel and never queue (off on ff is the race the queue ends: the
// subtest shows it does not queue, not that it succeeds). Before the queue, ff changes raced: each rebase lost to another
// change's merge until merge.max_rounds ran out (HANDLE_FAILED).
func TestMergeQueueSerialisesUpToDateMerges(t *testing.T) {
	t.Parallel()
	const k = 6
	for _, tc := range []struct {
		method string
		mode   string
		queued bool
	}{
		{method: "ff", queued: true},
		{method: "rebase_merge", queued: true},
		{method: "merge", queued: false},
		{method: "ff", mode: rules.QueueOff, queued: false},
	} {
		t.Run(tc.method+"/"+tc.mode, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: tc.method},
				Configure: func(cfg *flows.EngineConfig) {
					if tc.mode != "" {
						cfg.QueueFunc = func(string) flows.QueueConfig { return flows.QueueConfig{Mode: tc.mode, PipelineRetries: 1} }
					}
				}})
			ids := submitApproved(t, h, k)
			ops := driveAll(t, h, ids, 2*time.Hour)
			queued := 0
			for _, op := range ops {
				queued += countSteps(t, h, op.ID, rules.HandleQueued)
				if tc.mode == rules.QueueOff {
					continue // queue off on ff: the changes race as before the queue (some fail)
				}
				if op.Status != store.StatusMerged && op.Status != store.StatusValidated {
					t.Errorf("%s (!%d) ended at %s (%s), want merged", op.ID, op.MRIID, rules.StepCode(op.Step), op.Detail)
				}
				if n := countSteps(t, h, op.ID, rules.HandleRebasing); n > 1 {
					t.Errorf("%s (!%d) was rebased %d times, want at most once", op.ID, op.MRIID, n)
				}
			}
			switch {
			case tc.queued && queued == 0:
				t.Errorf("no change waited in the queue, want the changes behind the head to wait")
			case !tc.queued && queued > 0:
				t.Errorf("%d changes waited in a queue under the plain merge method, want none", queued)
			}
			q, err := h.Engine.Queue(t.Context(), h.Project.ID, "main")
			if err != nil {
				t.Fatal(err)
			}
			if q.HeadOperationID != "" || len(q.Waiting) > 0 {
				t.Errorf("queue after every merge: head %q, %d waiting; want empty", q.HeadOperationID, len(q.Waiting))
			}
		})
	}
}

// TestMergeQueueHeadPipelineFailure (issue 22 point 3): the pipeline of the
// queue's head that fails is run again queue.pipeline_retries times before
// the change is blamed; a change blamed leaves the queue in HANDLE_FAILED
// with the pipeline named, and the next change moves up and merges: no
// change fails because another one failed or merged first.
func TestMergeQueueHeadPipelineFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		retries int
		script  []string // MR pipelines in creation order: A, B, C, then B's after its rebase, ...
		bFails  bool
	}{
		{name: "retried and passes", retries: 1, script: []string{"success", "success", "success", "failed", "success"}},
		{name: "retried and fails again", retries: 1, script: []string{"success", "success", "success", "failed", "failed", "success"}, bFails: true},
		{name: "no retries", retries: -1, script: []string{"success", "success", "success", "failed", "success"}, bFails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: "ff"},
				Configure: func(cfg *flows.EngineConfig) {
					cfg.QueueFunc = func(string) flows.QueueConfig {
						return flows.QueueConfig{Mode: rules.QueueAuto, PipelineRetries: tc.retries, DeferCI: rules.DeferCIOff}
					}
				}})
			h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: tc.script})
			var ids []string
			for _, s := range []string{"svc-a", "svc-b", "svc-c"} {
				op := h.ToMROpened(t, flowtest.Change(s))
				ids = append(ids, op.ID)
			}
			ops := driveAll(t, h, ids, 2*time.Hour)
			merged := func(op store.Operation) bool {
				return op.Status == store.StatusMerged || op.Status == store.StatusValidated
			}
			if !merged(ops[0]) || !merged(ops[2]) {
				t.Errorf("A at %s, C at %s (%s); want both merged", rules.StepCode(ops[0].Step), rules.StepCode(ops[2].Step), ops[2].Detail)
			}
			retried := 0
			for _, ev := range h.Events(t, ids[1]) {
				if ev.Type == store.EventAttempt && strings.Contains(string(ev.Payload), "pipeline_retried") {
					retried++
				}
			}
			if want := max(tc.retries, 0); retried != want {
				t.Errorf("B's pipeline was run again %d times, want %d", retried, want)
			}
			switch {
			case tc.bFails && rules.StepCode(ops[1].Step) != rules.HandleFailed:
				t.Errorf("B at %s, want HANDLE_FAILED", rules.StepCode(ops[1].Step))
			case tc.bFails && !strings.Contains(ops[1].Detail, "failed"):
				t.Errorf("B's detail %q does not name the failed pipeline", ops[1].Detail)
			case !tc.bFails && !merged(ops[1]):
				t.Errorf("B at %s (%s), want merged after the retry", rules.StepCode(ops[1].Step), ops[1].Detail)
			}
			if n := countSteps(t, h, ids[2], rules.HandleRebasing); n > 1 {
				t.Errorf("C was rebased %d times, want at most once", n)
			}
		})
	}
}

// TestGitHubMergeQueueSerialisesStrictMerges (issue 22 points 2 and 7, on
// githubfake): under strict required checks a pull request must be up to
// date with its base ("behind" otherwise), so K changes approved at once
// wait in the branch's queue: every one merges, none is updated more than
// once, one merge call each.
func TestGitHubMergeQueueSerialisesStrictMerges(t *testing.T) {
	t.Parallel()
	const k = 5
	h := flowtest.New(t, &flowtest.Opts{Platform: "github"})
	h.GitHub.SetStrict(h.Repo.ID, true)
	var ids []string
	for i := range k {
		op := h.ToMROpened(t, flowtest.Change(fmt.Sprintf("svc-%d", i)))
		ids = append(ids, op.ID)
	}
	ops := driveAll(t, h, ids, 2*time.Hour)
	for _, op := range ops {
		if op.Status != store.StatusMerged && op.Status != store.StatusValidated {
			t.Errorf("%s (#%d) ended at %s (%s), want merged", op.ID, op.MRIID, rules.StepCode(op.Step), op.Detail)
		}
		if n := countSteps(t, h, op.ID, rules.HandleRebasing); n > 1 {
			t.Errorf("%s (#%d) was updated %d times, want at most once", op.ID, op.MRIID, n)
		}
	}
	if n := merges(h, http.StatusOK); n != k {
		t.Errorf("%d merges, want %d", n, k)
	}
}

// TestMergeQueueLeavers (issue 22 points 3 and 6): a change that leaves
// the queue leaves it for good and the next one moves up: the head whose
// rebase conflicts ends in HANDLE_REBASE_CONFLICT, a waiting change that
// is cancelled ends CLOSED with its merge request closed, and the others
// all merge.
func TestMergeQueueLeavers(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: "ff"}, Configure: noDeferCI})
	var ids []string
	for _, s := range []string{"svc-a", "svc-b", "svc-c", "svc-d"} {
		op := h.ToMROpened(t, flowtest.Change(s))
		ids = append(ids, op.ID)
	}
	// B's rebase will conflict; C is cancelled while it waits.
	h.GitLab.SetRebaseBehavior(h.Project.ID, h.Op(t, ids[1]).MRIID, gitlabfake.RebaseBehavior{Conflict: true})
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.RequireStep(t, ids[2], rules.HandleQueued)
	if _, err := h.Engine.Act(t.Context(), ids[2], rules.ActionCancel, rules.ActionParams{Actor: "olivia", Source: "api"}); err != nil {
		t.Fatalf("cancelling the waiting change: %v", err)
	}
	ops := driveAll(t, h, []string{ids[0], ids[3]}, 2*time.Hour)
	for _, op := range ops {
		if op.Status != store.StatusMerged && op.Status != store.StatusValidated {
			t.Errorf("%s (!%d) at %s (%s), want merged", op.ID, op.MRIID, rules.StepCode(op.Step), op.Detail)
		}
	}
	h.RequireStep(t, ids[1], rules.HandleRebaseConflict)
	h.RequireStep(t, ids[2], rules.Closed)
	if mr := h.MR(t, ids[2]); mr.State != "closed" {
		t.Errorf("the cancelled change's merge request is %s, want closed", mr.State)
	}
	q, err := h.Engine.Queue(t.Context(), h.Project.ID, "main")
	if err != nil {
		t.Fatal(err)
	}
	if q.HeadOperationID != "" || len(q.Waiting) != 0 {
		t.Errorf("queue after: head %q, %d waiting; want empty", q.HeadOperationID, len(q.Waiting))
	}
}

// TestMergeTrain (issue 22 point 4, on gitlabfake's merge trains): where
// the project has GitLab merge trains, an approved change is added to the
// train of its target branch (with its head sha) instead of merged or
// queued by the bot; GitLab merges it. A car whose train pipeline fails is
// removed by GitLab and its change ends HANDLE_FAILED; the other cars
// merge. No merge call and no rebase is made.
func TestMergeTrain(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: "ff", MergeTrains: true}})
	// Four MR pipelines pass, then the train pipelines: A's passes, B's
	// fails, and the restarted ones of C and D pass.
	h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"success", "success", "success", "success", "success", "failed", "success"}})
	var ids []string
	for _, s := range []string{"svc-a", "svc-b", "svc-c", "svc-d"} {
		op := h.ToMROpened(t, flowtest.Change(s))
		ids = append(ids, op.ID)
	}
	ops := driveAll(t, h, []string{ids[0], ids[2], ids[3]}, 2*time.Hour)
	for _, op := range ops {
		if op.Status != store.StatusMerged && op.Status != store.StatusValidated {
			t.Errorf("%s (!%d) at %s (%s), want merged by the train", op.ID, op.MRIID, rules.StepCode(op.Step), op.Detail)
		}
		if countSteps(t, h, op.ID, rules.HandleInTrain) != 1 {
			t.Errorf("%s went through HANDLE_IN_TRAIN %d times, want once", op.ID, countSteps(t, h, op.ID, rules.HandleInTrain))
		}
	}
	b := h.RunUntil(t, ids[1], rules.HandleFailed, time.Hour) // its poll finds the car gone
	if !strings.Contains(b.Detail, "removed") || !strings.Contains(b.Detail, "merge train") {
		t.Errorf("B's detail %q, want it removed from the merge train", b.Detail)
	}
	if n := h.GitLab.CallCount("PUT", "/api/v4/projects/*/merge_requests/*/merge"); n != 0 {
		t.Errorf("%d merge calls, want none (the train merges)", n)
	}
	if n := h.GitLab.CallCount("PUT", "/api/v4/projects/*/merge_requests/*/rebase"); n != 0 {
		t.Errorf("%d rebase calls, want none", n)
	}
	if n := h.GitLab.CallCount("POST", "/api/v4/projects/*/merge_trains/merge_requests/*"); n != 4 {
		t.Errorf("%d additions to the train, want 4 (one per change)", n)
	}
}

// TestMergeQueueFreeze (issue 22 point 5): while an operator has frozen a
// branch no change takes the head (the one merging finishes), and every
// waiting change says who froze it and why; unfrozen, they merge and say
// so no more.
func TestMergeQueueFreeze(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: "ff"}, Configure: noDeferCI})
	var ids []string
	for _, s := range []string{"svc-a", "svc-b", "svc-c"} {
		op := h.ToMROpened(t, flowtest.Change(s))
		ids = append(ids, op.ID)
	}
	if _, err := h.Engine.FreezeQueue(t.Context(), h.Project.ID, "main", true, "token:ops", "release freeze"); err != nil {
		t.Fatal(err)
	}
	h.DeliverWebhooks(t)
	h.RunFor(t, 30*time.Minute)
	h.DeliverWebhooks(t)
	h.RunFor(t, 30*time.Minute)
	merged := 0
	for _, id := range ids {
		op := h.Op(t, id)
		switch {
		case op.Status == store.StatusMerged || op.Status == store.StatusValidated:
			merged++
		case rules.StepCode(op.Step) != rules.HandleQueued:
			t.Errorf("%s at %s while frozen, want waiting in the queue or merged", id, rules.StepCode(op.Step))
		case !strings.Contains(op.Detail, "frozen by token:ops (release freeze)"):
			t.Errorf("%s's detail %q does not name who froze the queue", id, op.Detail)
		}
	}
	if merged > 1 {
		t.Errorf("%d changes merged while the queue was frozen, want at most the one that held the head", merged)
	}
	if _, err := h.Engine.FreezeQueue(t.Context(), h.Project.ID, "main", false, "token:ops", ""); err != nil {
		t.Fatal(err)
	}
	for _, op := range driveAll(t, h, ids, 2*time.Hour) {
		if op.Status != store.StatusMerged && op.Status != store.StatusValidated {
			t.Errorf("%s at %s (%s) after the unfreeze, want merged", op.ID, rules.StepCode(op.Step), op.Detail)
		}
		if strings.Contains(op.Detail, "frozen") {
			t.Errorf("%s still says %q after the unfreeze", op.ID, op.Detail)
		}
	}
}

// TestFreezeOnlyWhereAQueueApplies: an operator's freeze is refused with
// the reason where it would hold nothing (a branch whose changes merge in
// parallel) or where the platform has no such branch; it is taken where
// the changes queue, also where GitLab's merge train is the queue.
func TestFreezeOnlyWhereAQueueApplies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		spec    gitlabfake.ProjectSpec
		branch  string
		refused bool
		unknown bool
	}{
		{name: "plain merge", spec: gitlabfake.ProjectSpec{MergeMethod: "merge"}, branch: "main", refused: true},
		{name: "unknown branch", spec: gitlabfake.ProjectSpec{MergeMethod: "ff"}, branch: "mian", refused: true, unknown: true},
		{name: "ff", spec: gitlabfake.ProjectSpec{MergeMethod: "ff"}, branch: "main"},
		{name: "merge trains", spec: gitlabfake.ProjectSpec{MergeMethod: "merge", MergeTrains: true}, branch: "main"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, &flowtest.Opts{Project: tc.spec})
			_, err := h.Engine.FreezeQueue(t.Context(), h.Project.ID, tc.branch, true, "token:ops", "x")
			var nq *flows.NoQueueError
			switch {
			case tc.refused && !errors.As(err, &nq):
				t.Fatalf("freeze: %v, want a *NoQueueError", err)
			case tc.refused && nq.Unknown != tc.unknown:
				t.Errorf("refusal %q: unknown %v, want %v", nq.Reason, nq.Unknown, tc.unknown)
			case !tc.refused && err != nil:
				t.Fatalf("freeze: %v, want it taken", err)
			}
			q, err := h.Engine.Queue(t.Context(), h.Project.ID, tc.branch)
			if err != nil {
				t.Fatal(err)
			}
			if q.Frozen() == tc.refused {
				t.Errorf("queue frozen %v, want %v", q.Frozen(), !tc.refused)
			}
		})
	}
}

// TestMergeTrainFrozen: on a project with GitLab merge trains an
// operator's freeze still holds the changes back (they wait in
// HANDLE_QUEUED, nothing is added to the train); unfrozen, they join the
// train and merge.
func TestMergeTrainFrozen(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: "ff", MergeTrains: true}})
	if _, err := h.Engine.FreezeQueue(t.Context(), h.Project.ID, "main", true, "token:ops", "release freeze"); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range []string{"svc-a", "svc-b"} {
		ids = append(ids, h.ToMROpened(t, flowtest.Change(s)).ID)
	}
	h.DeliverWebhooks(t)
	h.RunFor(t, 10*time.Minute)
	for _, id := range ids {
		h.RequireStep(t, id, rules.HandleQueued)
	}
	if n := h.GitLab.CallCount("POST", "/api/v4/projects/*/merge_trains/merge_requests/*"); n != 0 {
		t.Fatalf("%d additions to the train while frozen, want none", n)
	}
	if _, err := h.Engine.FreezeQueue(t.Context(), h.Project.ID, "main", false, "token:ops", ""); err != nil {
		t.Fatal(err)
	}
	for _, op := range driveAll(t, h, ids, time.Hour) {
		if op.Status != store.StatusMerged && op.Status != store.StatusValidated {
			t.Errorf("%s at %s (%s) after the unfreeze, want merged by the train", op.ID, rules.StepCode(op.Step), op.Detail)
		}
	}
	if n := h.GitLab.CallCount("PUT", "/api/v4/projects/*/merge_requests/*/merge"); n != 0 {
		t.Errorf("%d merge calls, want none (the train merges)", n)
	}
}

// TestMergeQueueSaysWhereAChangeStands (issue 22 point 5): a change near
// the head of its queue says its place, the merge requests ahead of it and,
// once a head's turn has ended, about when it merges ("2nd in the merge
// queue for main, behind !1; about 1 min"); the updates are bookkeeping
// the timeline leaves out, and a change farther back than
// rules.QueueRefreshPlaces writes none while it waits there.
func TestMergeQueueSaysWhereAChangeStands(t *testing.T) {
	t.Parallel()
	const k = 6
	h := flowtest.New(t, &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: "ff"}})
	ids := submitApproved(t, h, k)
	withETA := regexp.MustCompile(`^(1st|2nd|3rd) in the merge queue for main, behind ![0-9]+(, ![0-9]+)*; (about [0-9]+ min|under a minute)$`)
	seen := map[string]bool{}
	end := h.Now().Add(2 * time.Hour)
	for {
		h.DeliverWebhooks(t)
		h.WorkUntilIdle(t)
		done := true
		for _, id := range ids {
			op := h.Op(t, id)
			if rules.StepCode(op.Step) == rules.HandleQueued {
				seen[op.Detail] = true
			}
			if op.Status != store.StatusMerged && op.Status != store.StatusValidated {
				done = false
			}
		}
		next, ok := h.NextDue(t)
		if done || !ok || h.Now().Add(next).After(end) {
			break
		}
		h.Advance(max(next, time.Millisecond))
	}
	eta := 0
	for d := range seen {
		if withETA.MatchString(d) {
			eta++
		}
	}
	if eta == 0 {
		t.Errorf("no waiting change said its place with an estimate; details seen: %v", seen)
	}
	for _, id := range ids {
		places := 0
		for _, ev := range h.Events(t, id) {
			if strings.Contains(string(ev.Payload), `"queue_place"`) {
				places++
			}
		}
		// A change moves up at most k-1 places, and writes only within
		// the last QueueRefreshPlaces of them (an estimate that changes
		// may be written again at the same place).
		if places > 2*rules.QueueRefreshPlaces {
			t.Errorf("%s wrote %d place updates, want at most %d", id, places, 2*rules.QueueRefreshPlaces)
		}
	}
}

// TestMergeQueueDefersCI (issue 22 point 2, queue.defer_ci): on a project
// whose merge method needs an up-to-date merge request and merges with a
// merge commit (rebase_merge; never ff, rules.DefersCI), a queued change's
// commit says [skip ci], so its merge request's first pipeline is skipped
// (gitlabfake models GitLab's skip rule), and it runs one pipeline: at the
// head, created through POST /projects/:id/pipeline on its branch (which
// ignores the marker) after the rebase, or at once when it is up to date.
// K changes cost K pipelines that ran, one rebase at most each, and every
// one merges. With queue.defer_ci off the same burst runs two pipelines
// for every change but the first (its own, and its rebased head's). A
// head pipeline that fails is retried the same way (a merge request
// pipeline would be skipped again) and the change then merges.
func TestMergeQueueDefersCI(t *testing.T) {
	t.Parallel()
	const k = 5
	for _, tc := range []struct {
		name      string
		deferCI   string
		script    []string
		pipelines int // that ran, for the k changes
		retried   bool
	}{
		{name: "auto", deferCI: rules.DeferCIAuto, pipelines: k},
		{name: "off", deferCI: rules.DeferCIOff, pipelines: 2*k - 1},
		{name: "head pipeline retried", deferCI: rules.DeferCIAuto, script: []string{"failed", "success"}, pipelines: k + 1, retried: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: "rebase_merge"},
				Configure: func(cfg *flows.EngineConfig) {
					cfg.QueueFunc = func(string) flows.QueueConfig {
						return flows.QueueConfig{Mode: rules.QueueAuto, PipelineRetries: 1, DeferCI: tc.deferCI}
					}
				}})
			h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: tc.script})
			ids := submitApproved(t, h, k)
			ops := driveAll(t, h, ids, 2*time.Hour)
			for _, op := range ops {
				if op.Status != store.StatusMerged && op.Status != store.StatusValidated {
					t.Errorf("%s (!%d) ended at %s (%s), want merged", op.ID, op.MRIID, rules.StepCode(op.Step), op.Detail)
				}
				if n := countSteps(t, h, op.ID, rules.HandleRebasing); n > 1 {
					t.Errorf("%s (!%d) was rebased %d times, want at most once", op.ID, op.MRIID, n)
				}
				if tc.deferCI != rules.DeferCIOff && countSteps(t, h, op.ID, rules.CreateMROpened) > 0 {
					t.Errorf("%s waited for a first pipeline (CREATE_MR_OPENED), want it deferred", op.ID)
				}
			}
			if got := h.GitLab.MRPipelineCount(h.Project.ID); got != tc.pipelines {
				t.Errorf("%d pipelines ran for the %d merge requests, want %d", got, k, tc.pipelines)
			}
			skipped := h.GitLab.SkippedPipelineCount(h.Project.ID)
			switch {
			case tc.deferCI == rules.DeferCIOff && skipped > 0:
				t.Errorf("%d pipelines skipped with queue.defer_ci off, want none", skipped)
			case tc.deferCI != rules.DeferCIOff && skipped < k:
				t.Errorf("%d pipelines skipped, want at least one per change (its merge request's first)", skipped)
			}
			retried := 0
			for _, id := range ids {
				for _, ev := range h.Events(t, id) {
					if ev.Type == store.EventAttempt && strings.Contains(string(ev.Payload), "pipeline_retried") {
						retried++
					}
				}
			}
			if want := map[bool]int{true: 1}[tc.retried]; retried != want {
				t.Errorf("%d head pipelines run again, want %d", retried, want)
			}
		})
	}
}

// TestMergeQueueRetryAfterTheHeadPipelineFailed (issue 22 point 3): a
// change whose pipeline failed at the head of the queue, retried with
// /retry, gets a new pipeline of its head before any merge call (the
// merge would be refused), and merges once it passes: under
// queue.defer_ci (its commit says [skip ci], so a merge request pipeline
// would be skipped and a pipeline of its branch runs instead), also after
// the project turned queue.defer_ci off, and without it.
func TestMergeQueueRetryAfterTheHeadPipelineFailed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		method             string
		deferCI, retryWith string
	}{
		{"deferred", "rebase_merge", rules.DeferCIAuto, rules.DeferCIAuto},
		{"deferred, then queue.defer_ci off", "rebase_merge", rules.DeferCIAuto, rules.DeferCIOff},
		{"not deferred (ff)", "ff", rules.DeferCIAuto, rules.DeferCIAuto},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mode := tc.deferCI
			h := flowtest.New(t, &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: tc.method},
				Configure: func(cfg *flows.EngineConfig) {
					cfg.QueueFunc = func(string) flows.QueueConfig {
						return flows.QueueConfig{Mode: rules.QueueAuto, PipelineRetries: -1, DeferCI: mode}
					}
				}})
			// The first pipeline that runs fails (deferred: the head's;
			// ff: the merge request's own), the next passes. gitlabfake
			// refuses a merge over a failed head pipeline (405
			// ci_must_pass), as GitLab does when pipelines must succeed.
			h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed", "success"}})
			ids := submitApproved(t, h, 1)
			ops := driveAll(t, h, ids, time.Hour)
			failed := rules.StepCode(ops[0].Step)
			if failed != rules.HandleFailed && failed != rules.CreatePipelineFailed {
				t.Fatalf("at %s (%s), want the pipeline failed", failed, ops[0].Detail)
			}
			mode = tc.retryWith
			if _, err := h.Engine.Act(t.Context(), ids[0], rules.ActionRetry, rules.ActionParams{Actor: "olivia", Source: "api"}); err != nil {
				t.Fatal(err)
			}
			ops = driveAll(t, h, ids, time.Hour)
			if ops[0].Status != store.StatusMerged && ops[0].Status != store.StatusValidated {
				t.Fatalf("after /retry at %s (%s), want merged", rules.StepCode(ops[0].Step), ops[0].Detail)
			}
		})
	}
}
