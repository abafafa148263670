package flows_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/github/githubfake"
)

// TestGitHubUpdateBranchWaitsForTheNewHead (issue 21 point 14, a GitHub
// rule on githubfake): the base moves under strict required checks, so
// the pull request is "behind" (need_rebase) when the change comes to
// merge. The change asks update-branch once (202), waits in
// HANDLE_REBASING while the head is still the one it asked on (GitHub has
// no progress flag: the head is stored with the change), then waits for
// the new head's checks, approves it and merges it: one update-branch, one
// merge, the merged head the updated one.
func TestGitHubUpdateBranchWaitsForTheNewHead(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, &flowtest.Opts{Platform: "github"})
	h.GitHub.SetStrict(h.Repo.ID, true)
	op := h.ToMROpened(t, flowtest.Change("svc"))
	before := h.PR(t, op.ID).HeadSHA
	h.GitHub.HoldUpdates(true) // the update lands when the test says
	h.GitHub.PushToBranch(h.Repo.ID, "main", flowtest.Requester)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.HandleRebasing)
	h.RunFor(t, 5*time.Minute) // polls: the head has not moved, the update runs
	got := h.RequireStep(t, op.ID, rules.HandleRebasing)
	if got.HeadSHA != before {
		t.Fatalf("head sha %s stored in HANDLE_REBASING, want the one the update was asked on, %s", got.HeadSHA, before)
	}
	if n := h.GitHub.CallCount(http.MethodPut, "/repos/*/*/pulls/*/update-branch"); n != 1 {
		t.Fatalf("update-branch calls = %d while the update runs, want 1", n)
	}
	if n := merges(h, http.StatusOK); n != 0 {
		t.Fatalf("%d merges while the update runs, want none", n)
	}
	h.GitHub.FinishUpdates()
	h.DeliverWebhooks(t)
	merged := h.RunUntil(t, op.ID, rules.HandleMerged, 30*time.Minute)
	pr := h.PR(t, op.ID)
	if !pr.Merged || pr.HeadSHA == before {
		t.Fatalf("pull request %+v, want merged at a head other than %s", pr, before)
	}
	if n := h.GitHub.CallCount(http.MethodPut, "/repos/*/*/pulls/*/update-branch"); n != 1 {
		t.Errorf("update-branch calls = %d, want 1", n)
	}
	if n := merges(h, http.StatusOK); n != 1 {
		t.Errorf("%d merges, want 1", n)
	}
	// The merge the flow tried while GitHub had not computed mergeable yet
	// (null on the first read after the base moved: "checking") was
	// refused with 405 "behind"; that refusal is what sent it to
	// update-branch, and it is not tried again in a loop.
	if n := merges(h, http.StatusMethodNotAllowed); n > 1 {
		t.Errorf("%d refused merges, want at most 1", n)
	}
	if merged.Rounds != 1 {
		t.Errorf("rounds = %d, want 1", merged.Rounds)
	}
}

// merges counts the pull-request merge calls GitHub answered status.
func merges(h *flowtest.Harness, status int) int {
	n := 0
	for _, c := range h.GitHub.Calls() {
		if c.Method == http.MethodPut && matches("/repos/*/*/pulls/*/merge", c.Path) && c.Status == status {
			n++
		}
	}
	return n
}

// TestGitHubMergeableNullIsNotARefusal (issue 21 point 14, a GitHub rule
// on githubfake): GitHub answers mergeable null while it computes the
// test merge (githubfake: on the first read after any change of the pull
// request or its base). The base moves as the robot merges, so the merge
// is refused (405) and the read of why finds mergeable null, which is
// "checking" (wait and try again), never a conflict or a refusal: the
// change merges on its next round.
func TestGitHubMergeableNullIsNotARefusal(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, &flowtest.Opts{Platform: "github"})
	// The base moves just as the robot merges: GitHub refuses the merge
	// (405 "Base branch was modified") and computes mergeable again, so
	// the read that follows answers null.
	var once sync.Once
	h.GitHub.SetBeforeCall(func(method, path string) {
		if method == http.MethodPut && matches("/repos/*/*/pulls/*/merge", path) {
			once.Do(func() { h.GitHub.PushToBranch(h.Repo.ID, "main", flowtest.Requester) })
		}
	})
	h.GitHub.InjectFault(githubfake.Fault{Method: http.MethodPut, PathPattern: "/repos/*/*/pulls/*/merge", Times: 1,
		Status: http.StatusMethodNotAllowed, Body: `{"message":"Base branch was modified. Review and try the merge again.","documentation_url":"https://docs.github.com/rest/pulls/pulls#merge-a-pull-request"}`})
	op := h.ToMROpened(t, flowtest.Change("svc"))
	h.DeliverWebhooks(t)
	h.RunUntil(t, op.ID, rules.HandleMerged, 30*time.Minute)
	for _, s := range h.Steps(t, op.ID) {
		if s == rules.HandleRebaseConflict || s == rules.HandleNotMergeable || s == rules.HandleFailed {
			t.Errorf("the change went through %s on a pull request GitHub had not computed yet", s)
		}
	}
	if n := merges(h, http.StatusOK); n != 1 {
		t.Errorf("%d merges, want 1", n)
	}
}
