package flows_test

import (
	"net/http"
	"testing"
	"time"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
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
