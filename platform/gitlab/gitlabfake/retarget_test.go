package gitlabfake

import (
	"testing"
)

// TestRetargetMR (issue 21 point 1): PUT /projects/:id/merge_requests/:iid
// with target_branch moves the MR onto another branch (doc/api/
// merge_requests.md "Update MR"): 200 with the new target_branch, the
// merge status computed against it, and the Merge Request Hook "update"
// with changes.target_branch {previous, current} and the new
// object_attributes.target_branch. A branch that does not exist, the
// source branch itself, or a second open MR of the same source and
// target is refused, as on create.
func TestRetargetMR(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{MergeMethod: "ff"})
	e.must(201, "POST", e.projPath("/repository/branches"), robotToken, map[string]any{"branch": "release", "ref": "main"})
	mr := e.openMR("feature")
	e.idle()
	e.srv.PushToTarget(e.proj.ID, "main") // behind main, not behind release
	if got := e.must(200, "GET", mrPath(e, mr, ""), robotToken, nil)["detailed_merge_status"]; got != "need_rebase" {
		t.Fatalf("onto main after main moved: %v, want need_rebase", got)
	}
	refusals := []struct {
		name, target string
		want         int
	}{
		{"a branch that does not exist", "nope", 422},
		{"the source branch", "feature", 422},
	}
	for _, tt := range refusals {
		if st, _, b := e.call("PUT", mrPath(e, mr, ""), robotToken, map[string]any{"target_branch": tt.target}); st != tt.want {
			t.Errorf("target %s: %d %s, want %d", tt.name, st, b, tt.want)
		}
	}
	got := e.must(200, "PUT", mrPath(e, mr, ""), robotToken, map[string]any{"target_branch": "release"})
	if got["target_branch"] != "release" || got["detailed_merge_status"] != "mergeable" {
		t.Errorf("answer: target_branch %v, detailed_merge_status %v; want release, mergeable", got["target_branch"], got["detailed_merge_status"])
	}
	if snap, _ := e.srv.MergeRequest(e.proj.ID, 1); snap.TargetBranch != "release" {
		t.Errorf("snapshot target %q, want release", snap.TargetBranch)
	}
	e.idle()
	var hook map[string]any
	for _, h := range e.recv.find(EventMergeRequest, "update") {
		if ch, _ := h["changes"].(map[string]any); ch["target_branch"] != nil {
			hook = h
		}
	}
	if hook == nil {
		t.Fatal("no Merge Request Hook update with changes.target_branch")
	}
	ch := hook["changes"].(map[string]any)["target_branch"].(map[string]any)
	if ch["previous"] != "main" || ch["current"] != "release" || hook["object_attributes"].(map[string]any)["target_branch"] != "release" {
		t.Errorf("hook changes.target_branch %v, object_attributes.target_branch %v", ch, hook["object_attributes"].(map[string]any)["target_branch"])
	}
	// Another MR of the same source onto main, then retargeting it onto
	// release would make two open MRs of feature into release.
	e.must(201, "POST", e.projPath("/merge_requests"), robotToken, map[string]any{"source_branch": "feature", "target_branch": "main", "title": "again"})
	st, _, b := e.call("PUT", e.projPath("/merge_requests/2"), robotToken, map[string]any{"target_branch": "release"})
	if st != 409 || message(t, b) != `["Another open merge request already exists for this source branch: !1"]` {
		t.Errorf("a second open MR of feature into release: %d %s, want 409", st, b)
	}
}
