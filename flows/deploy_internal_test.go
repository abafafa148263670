package flows

import (
	"testing"

	"changebot/platform"
)

// TestCompleteAfter: a compare answer from a pipeline's sha is trusted to
// list every commit merged after it only when the first parents lead from
// its last commit back to that sha through listed commits (GitLab may keep
// only the newest 100).
func TestCompleteAfter(t *testing.T) {
	t.Parallel()
	c := func(sha string, parents ...string) platform.Commit {
		return platform.Commit{SHA: sha, ParentIDs: parents}
	}
	tests := []struct {
		name    string
		commits []platform.Commit
		want    bool
	}{
		{name: "nothing after the sha", want: true},
		{name: "linear, back to the sha", commits: []platform.Commit{c("b", "p"), c("c", "b"), c("d", "c")}, want: true},
		{name: "merge commits with their MRs' commits", want: true,
			commits: []platform.Commit{c("x1", "p"), c("m1", "p", "x1"), c("x2", "m1"), c("m2", "m1", "x2")}},
		{name: "the oldest commits cut off", commits: []platform.Commit{c("c", "b"), c("d", "c")}, want: false},
		{name: "the sha is not on the first-parent line", commits: []platform.Commit{c("b", "q"), c("c", "b")}, want: false},
		{name: "a root commit", commits: []platform.Commit{c("b"), c("c", "b")}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := completeAfter(tt.commits, "p"); got != tt.want {
				t.Fatalf("completeAfter = %v, want %v", got, tt.want)
			}
		})
	}
}
