package gitlabfake

import "testing"

func TestCompareAndMergeBase(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	e.openMR("feature")
	main := e.must(200, "GET", e.projPath("/repository/branches/main"), robotToken, nil)["commit"].(map[string]any)["id"]
	e.srv.PushToTarget(e.proj.ID, "main")

	base := e.must(200, "GET", e.projPath("/repository/merge_base?refs[]=main&refs[]=feature"), robotToken, nil)
	if base["id"] != main {
		t.Errorf("merge base %v, want the old main head %v", base["id"], main)
	}
	cmp := e.must(200, "GET", e.projPath("/repository/compare?from=main&to=feature"), robotToken, nil)
	commits := cmp["commits"].([]any)
	if len(commits) != 1 || commits[0].(map[string]any)["title"] != "Add feature" {
		t.Errorf("compare main..feature commits: %v", commits)
	}
	if diffs := cmp["diffs"].([]any); len(diffs) != 1 || diffs[0].(map[string]any)["new_path"] != "feature.yaml" {
		t.Errorf("compare diffs: %v", diffs)
	}
	got := e.must(200, "GET", e.projPath("/repository/commits/feature"), robotToken, nil)
	if got["title"] != "Add feature" || len(got["parent_ids"].([]any)) != 1 {
		t.Errorf("commit: %v", got)
	}
	e.must(404, "GET", e.projPath("/repository/commits/0000000000000000000000000000000000000000"), robotToken, nil)
}
