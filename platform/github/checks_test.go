package github_test

import (
	"fmt"
	"testing"

	"changebot/platform"
	"changebot/platform/github"
	"changebot/platform/github/githubfake"
)

// TestChecksBeyondOnePage (issue 21 point 5): GitHub answers at most 100
// check runs or statuses a page (docs.github.com "List check runs for a
// Git reference", "Get the combined status for a specific reference":
// per_page max 100), check runs newest first and statuses oldest first
// (api-real-combined-status.exchange.json), and githubfake pages as it
// does. The head's pipeline is synthesized from every page: the oldest of
// 102 check runs failing fails it (one page read it as success), a
// required check that is the oldest of 101 is found (one page kept the
// change waiting for it forever), and so for the newest status.
func TestChecksBeyondOnePage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		required []string
		// The test reports n checks of the head, oldest first, passing but
		// the one named odd with state oddState: the oldest check run, or
		// the newest status (the last of the list either way).
		statuses      bool
		n             int
		odd, oddState string
		want          string
		wantReads     int // of the list endpoint, for the head
	}{
		{name: "oldest of 102 check runs failed", n: 102, odd: "lint", oddState: "failure",
			want: platform.PipelineFailed, wantReads: 2},
		{name: "required check run is the oldest of 101", n: 101, required: []string{"build"}, odd: "build", oddState: "success",
			want: platform.PipelineSuccess, wantReads: 2},
		{name: "newest of 102 statuses failed", statuses: true, n: 102, odd: "ci/lint", oddState: "failure",
			want: platform.PipelineFailed, wantReads: 2},
		{name: "required status is the newest of 101", statuses: true, n: 101, required: []string{"ci/build"}, odd: "ci/build", oddState: "success",
			want: platform.PipelineSuccess, wantReads: 2},
		{name: "100 check runs fit one page", n: 100, odd: "lint", oddState: "failure",
			want: platform.PipelineFailed, wantReads: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeEnv(t, githubfake.Options{}, githubfake.RepoSpec{NoCI: true, RequiredContexts: tt.required}, github.Config{})
			cm, mr := change(t, f, "feature")
			for i := range tt.n {
				name, state := fmt.Sprintf("check-%03d", i), "success"
				if (!tt.statuses && i == 0) || (tt.statuses && i == tt.n-1) {
					name, state = tt.odd, tt.oddState
				}
				if tt.statuses {
					f.srv.SetStatus(f.repo.ID, cm.SHA, name, state)
				} else {
					f.srv.SetCheckRun(f.repo.ID, cm.SHA, name, "ci-app", "completed", state)
				}
			}
			list := "/repos/acme/config/commits/" + cm.SHA + "/check-runs"
			if tt.statuses {
				list = "/repos/acme/config/commits/" + cm.SHA + "/status"
			}
			before := f.srv.CallCount("GET", list)
			got, err := f.c.MergeRequest(t.Context(), f.repo.ID, mr.IID, false)
			if err != nil || got.HeadPipeline == nil {
				t.Fatalf("MergeRequest: %+v, %v", got, err)
			}
			if got.HeadPipeline.Status != tt.want {
				t.Errorf("head pipeline %s; want %s", got.HeadPipeline.Status, tt.want)
			}
			if n := f.srv.CallCount("GET", list) - before; n != tt.wantReads {
				t.Errorf("reads of %s = %d; want %d (pages of 100)", list, n, tt.wantReads)
			}
		})
	}
}
