package gitlabfake

import (
	"testing"
)

// TestMRLabels: PUT .../merge_requests/:iid with add_labels and
// remove_labels (doc/api/merge_requests.md "Update MR") changes the merge
// request's labels (GET answers their titles) and sends one Merge Request
// Hook "update" each time with changes.labels {previous, current} and the
// top-level labels in the shape of fixture webhook-merge_request-open.json;
// a change that changes nothing sends none.
func TestMRLabels(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	mr := e.openMR("feature")
	e.idle()
	e.must(200, "PUT", mrPath(e, mr, ""), robotToken, map[string]any{"add_labels": "changebot, docs"})
	e.must(200, "PUT", mrPath(e, mr, ""), robotToken, map[string]any{"add_labels": "docs"})
	got := e.must(200, "PUT", mrPath(e, mr, ""), robotToken, map[string]any{"remove_labels": "changebot"})
	if labels, _ := got["labels"].([]any); len(labels) != 1 || labels[0] != "docs" {
		t.Errorf("labels after the removal %v, want [docs]", got["labels"])
	}
	e.idle()
	var changes []map[string]any
	for _, h := range e.recv.find(EventMergeRequest, "update") {
		if ch, _ := h["changes"].(map[string]any); ch["labels"] != nil {
			changes = append(changes, ch["labels"].(map[string]any))
			for _, l := range h["labels"].([]any) {
				for _, k := range []string{"id", "title", "color", "project_id", "created_at", "updated_at", "template", "description", "type", "group_id"} {
					if _, ok := l.(map[string]any)[k]; !ok {
						t.Errorf("label %v lacks %q", l, k)
					}
				}
			}
		}
	}
	if len(changes) != 2 {
		t.Fatalf("%d hooks with changes.labels, want 2 (the repeated add changes nothing)", len(changes))
	}
	titles := func(v any) []string {
		var out []string
		for _, l := range v.([]any) {
			out = append(out, l.(map[string]any)["title"].(string))
		}
		return out
	}
	if p, c := titles(changes[0]["previous"]), titles(changes[0]["current"]); len(p) != 0 || len(c) != 2 {
		t.Errorf("first change %v -> %v, want none -> changebot, docs", p, c)
	}
	if p, c := titles(changes[1]["previous"]), titles(changes[1]["current"]); len(p) != 2 || len(c) != 1 || c[0] != "docs" {
		t.Errorf("second change %v -> %v, want changebot, docs -> docs", p, c)
	}
}
