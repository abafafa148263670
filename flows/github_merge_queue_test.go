package flows_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/github/githubfake"
	"changebot/store"
)

// TestGitHubMergeQueue (issue 22 point 4, on githubfake): where the
// target branch requires a merge queue, an approved change's pull request
// is enqueued (GraphQL enqueuePullRequest, at its head) instead of merged
// or queued by the bot; GitHub merges it once its merge group checks pass.
// A change whose merge group checks fail is dequeued by GitHub and ends
// HANDLE_FAILED naming the merge queue; the others merge. No REST merge
// and no update-branch is made, each pull request is enqueued once, and
// whether main requires a queue is read once or twice, not per change.
func TestGitHubMergeQueue(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, &flowtest.Opts{Platform: "github"})
	h.GitHub.SetMergeQueue(h.Repo.ID, "main", true)
	// The pull requests' checks pass; the merge groups: A's passes, B's
	// fails, C's and D's pass.
	h.GitHub.SetCIScript(h.Repo.ID, githubfake.CIScript{MergeGroups: []string{"success", "failure", "success"}})
	var ids []string
	for _, s := range []string{"svc-a", "svc-b", "svc-c", "svc-d"} {
		op := h.ToMROpened(t, flowtest.Change(s))
		ids = append(ids, op.ID)
	}
	ops := driveAll(t, h, ids, 2*time.Hour)
	failed := 0
	for _, op := range ops {
		if countSteps(t, h, op.ID, rules.HandleInTrain) != 1 {
			t.Errorf("%s went through HANDLE_IN_TRAIN %d times, want once", op.ID, countSteps(t, h, op.ID, rules.HandleInTrain))
		}
		if n, shas := h.GitHub.EnqueueCount(h.Repo.ID, op.MRIID); n != 1 || len(shas) != 1 {
			t.Errorf("%s (#%d) enqueued %d times, want once", op.ID, op.MRIID, n)
		}
		if rules.StepCode(op.Step) == rules.HandleFailed {
			failed++
			if !strings.Contains(op.Detail, "merge queue of main") || !strings.Contains(op.Detail, "merge group checks") {
				t.Errorf("%s's detail %q, want it removed from the merge queue", op.ID, op.Detail)
			}
			continue
		}
		if op.Status != store.StatusMerged && op.Status != store.StatusValidated {
			t.Errorf("%s (#%d) at %s (%s), want merged by the queue", op.ID, op.MRIID, rules.StepCode(op.Step), op.Detail)
		}
	}
	if failed != 1 {
		t.Errorf("%d changes failed, want 1 (the merge group whose checks failed)", failed)
	}
	if n := merges(h, http.StatusOK) + merges(h, http.StatusMethodNotAllowed); n != 0 {
		t.Errorf("%d REST merge calls, want none (the queue merges)", n)
	}
	if n := h.GitHub.CallCount("PUT", "/repos/*/*/pulls/*/update-branch"); n != 0 {
		t.Errorf("%d update-branch calls, want none", n)
	}
	// Four changes each asked at their merge; the answer is kept per
	// branch for projectReadTTL.
	if n := h.GitHub.GraphQLCalls("mergeQueue"); n < 1 || n > 2 {
		t.Errorf("%d reads of whether main requires a merge queue, want 1 or 2 for four changes", n)
	}
}

// TestGitHubMergeQueueWhateverQueueMode: queue.mode off does not make
// changebot merge through REST into a branch that requires a merge queue
// (GitHub would answer 405): the change is enqueued and merged by GitHub.
func TestGitHubMergeQueueWhateverQueueMode(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, &flowtest.Opts{Platform: "github", Configure: func(cfg *flows.EngineConfig) {
		cfg.QueueFunc = func(string) flows.QueueConfig {
			return flows.QueueConfig{Mode: rules.QueueOff, PipelineRetries: 1, DeferCI: rules.DeferCIOff}
		}
	}})
	h.GitHub.SetMergeQueue(h.Repo.ID, "main", true)
	op := h.ToMROpened(t, flowtest.Change("svc-off"))
	ops := driveAll(t, h, []string{op.ID}, time.Hour)
	if ops[0].Status != store.StatusMerged && ops[0].Status != store.StatusValidated {
		t.Fatalf("ended at %s (%s), want merged by the queue", rules.StepCode(ops[0].Step), ops[0].Detail)
	}
	if n, _ := h.GitHub.EnqueueCount(h.Repo.ID, ops[0].MRIID); n != 1 || merges(h, http.StatusMethodNotAllowed) != 0 {
		t.Errorf("enqueued %d times, %d refused REST merges; want 1 and 0", n, merges(h, http.StatusMethodNotAllowed))
	}
}
