package gitlabfake

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"changebot/internal/fixture"
)

// TestMRDiffs checks GET .../merge_requests/:iid/diffs against the docs'
// example (testdata/gitlab/api-mr-diffs-list.json) and what it lists: the
// merge request's changes from the target to its head, a moved file as one
// rename, a file created and deleted again on the branch not at all, and
// pages of per_page.
func TestMRDiffs(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	e.must(201, "POST", e.projPath("/repository/commits"), robotToken, map[string]any{
		"branch": "main", "commit_message": "Seed",
		"actions": []any{
			map[string]any{"action": "create", "file_path": "old/name.yaml", "content": "keep: me\n"},
			map[string]any{"action": "create", "file_path": "edit.yaml", "content": "a: 1\n"},
			map[string]any{"action": "create", "file_path": "gone.yaml", "content": "bye\n"},
		},
	})
	e.must(201, "POST", e.projPath("/repository/branches"), robotToken, map[string]any{"branch": "feature", "ref": "main"})
	for _, actions := range [][]any{
		{
			map[string]any{"action": "create", "file_path": "tmp.yaml", "content": "t\n"},
			map[string]any{"action": "update", "file_path": "edit.yaml", "content": "a: 2\n"},
		},
		{
			map[string]any{"action": "delete", "file_path": "tmp.yaml"},
			map[string]any{"action": "delete", "file_path": "gone.yaml"},
			map[string]any{"action": "move", "previous_path": "old/name.yaml", "file_path": "new/name.yaml"},
			map[string]any{"action": "create", "file_path": "added.yaml", "content": "x: 1\n"},
		},
	} {
		e.must(201, "POST", e.projPath("/repository/commits"), robotToken, map[string]any{"branch": "feature", "commit_message": "Change", "actions": actions})
	}
	mr := e.must(201, "POST", e.projPath("/merge_requests"), robotToken, map[string]any{"source_branch": "feature", "target_branch": "main", "title": "Change"})

	st, _, body := e.call("GET", mrPath(e, mr, "/diffs"), robotToken, nil)
	if st != 200 {
		t.Fatalf("GET diffs = %d: %s", st, body)
	}
	if diff := fixture.Diff(t, fixture.GitLab(t, "api-mr-diffs-list.json"), body, fixture.Check{}); len(diff) > 0 {
		t.Errorf("diffs differ from api-mr-diffs-list.json:\n  %s", strings.Join(diff, "\n  "))
	}
	type entry struct {
		OldPath     string `json:"old_path"`
		NewPath     string `json:"new_path"`
		NewFile     bool   `json:"new_file"`
		RenamedFile bool   `json:"renamed_file"`
		DeletedFile bool   `json:"deleted_file"`
	}
	var got []entry
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := []entry{
		{OldPath: "added.yaml", NewPath: "added.yaml", NewFile: true},
		{OldPath: "edit.yaml", NewPath: "edit.yaml"},
		{OldPath: "gone.yaml", NewPath: "gone.yaml", DeletedFile: true},
		{OldPath: "old/name.yaml", NewPath: "new/name.yaml", RenamedFile: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diffs = %+v\nwant %+v", got, want)
	}

	st, h, body := e.call("GET", mrPath(e, mr, "/diffs?per_page=3&page=2"), robotToken, nil)
	if err := json.Unmarshal(body, &got); st != 200 || err != nil || len(got) != 1 || h.Get("X-Total") != "4" {
		t.Errorf("page 2 of 3 = %d, %d entries, X-Total %q; want 200, 1 entry, 4", st, len(got), h.Get("X-Total"))
	}
	if st, _, _ := e.call("GET", e.projPath("/merge_requests/99/diffs"), robotToken, nil); st != 404 {
		t.Errorf("diffs of a missing merge request = %d, want 404", st)
	}
}
