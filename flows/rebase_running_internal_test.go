package flows

import (
	"testing"

	"changebot/platform"
	"changebot/store"
)

// TestRebaseRunning is the rule HANDLE_REBASING waits by (issue 21 point
// 7): a rebase or update-branch the change asked for is running while the
// platform says so or while the MR's head is still the head it was asked
// on (the change's HeadSHA, stored when it entered the step) and the
// platform still wants an up-to-date head. It reads the database's record,
// never one process's memory, so a restarted replica keeps waiting.
func TestRebaseRunning(t *testing.T) {
	t.Parallel()
	const asked, rebased = "aaaa", "bbbb"
	for _, tc := range []struct {
		name string
		head string // op.HeadSHA
		mr   platform.MergeRequest
		want bool
	}{
		{"GitLab says it runs", asked, platform.MergeRequest{SHA: asked, RebaseInProgress: true, DetailedMergeStatus: "need_rebase"}, true},
		{"GitLab says it runs on a new head", asked, platform.MergeRequest{SHA: rebased, RebaseInProgress: true}, true},
		{"GitHub behind, head not moved yet", asked, platform.MergeRequest{SHA: asked, DetailedMergeStatus: "need_rebase"}, true},
		{"GitHub still computing, head not moved", asked, platform.MergeRequest{SHA: asked, DetailedMergeStatus: "checking"}, true},
		{"head moved: the update landed", asked, platform.MergeRequest{SHA: rebased, DetailedMergeStatus: "checking"}, false},
		{"head not moved but up to date", asked, platform.MergeRequest{SHA: asked, DetailedMergeStatus: "mergeable"}, false},
		{"head not moved, conflict", asked, platform.MergeRequest{SHA: asked, DetailedMergeStatus: "need_rebase", HasConflicts: true}, false},
		{"head not moved, GitLab merge error", asked, platform.MergeRequest{SHA: asked, DetailedMergeStatus: "need_rebase", MergeError: "Rebase failed: conflict"}, false},
		{"no head recorded", "", platform.MergeRequest{SHA: asked, DetailedMergeStatus: "need_rebase"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := rebaseRunning(store.Operation{HeadSHA: tc.head}, tc.mr); got != tc.want {
				t.Errorf("rebaseRunning = %v, want %v", got, tc.want)
			}
		})
	}
}
