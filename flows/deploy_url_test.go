package flows

import (
	"testing"

	"changebot/store"
)

func TestDeployURL(t *testing.T) {
	for _, c := range []struct {
		name     string
		op       store.Operation
		pipeline int64
		want     string
	}{
		{"gitlab pipeline known", store.Operation{Platform: store.PlatformGitLab, MRWebURL: "https://gl.example/g/p/-/merge_requests/7", MergeCommitSHA: "abc"}, 42,
			"https://gl.example/g/p/-/pipelines/42"},
		{"gitlab merge commit only", store.Operation{Platform: store.PlatformGitLab, MRWebURL: "https://gl.example/g/p/-/merge_requests/7", MergeCommitSHA: "abc"}, 0,
			"https://gl.example/g/p/-/commit/abc/pipelines"},
		{"gitlab before the merge", store.Operation{Platform: store.PlatformGitLab, MRWebURL: "https://gl.example/g/p/-/merge_requests/7"}, 0, ""},
		{"github merge commit", store.Operation{Platform: store.PlatformGitHub, MRWebURL: "https://github.com/o/r/pull/7", MergeCommitSHA: "abc"}, 3,
			"https://github.com/o/r/commit/abc"},
		{"github before the merge", store.Operation{Platform: store.PlatformGitHub, MRWebURL: "https://github.com/o/r/pull/7"}, 3, ""},
		{"github url not a pull request", store.Operation{Platform: store.PlatformGitHub, MRWebURL: "https://github.com/o/r", MergeCommitSHA: "abc"}, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := deployURL(c.op, c.pipeline); got != c.want {
				t.Errorf("deployURL = %q, want %q", got, c.want)
			}
		})
	}
}
