package gitlabfake

import (
	"strings"
	"testing"
)

// TestSizeLimits: like GitLab, the fake refuses with 400 naming the
// attribute a note body over 1,000,000 characters, an MR description over
// 1,048,576 and a title over 255 (counted in characters, not bytes), on
// create and on edit, and changes nothing; at the limit it accepts.
func TestSizeLimits(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	mr := e.openMR("feature")
	e.must(201, "POST", e.projPath("/repository/branches"), robotToken, map[string]any{"branch": "other", "ref": e.proj.DefaultBranch})
	notes := mrPath(e, mr, "/notes")
	note := e.must(201, "POST", notes, robotToken, map[string]any{"body": "status"})
	notePath := mrPath(e, mr, "/notes/"+itoa(int64(note["id"].(float64))))
	mrs := e.projPath("/merge_requests")
	newMR := func(title, desc string) map[string]any {
		return map[string]any{"source_branch": "other", "target_branch": e.proj.DefaultBranch, "title": title, "description": desc}
	}
	long := func(n int) string { return strings.Repeat("é", n) } // 2 bytes each: limits count characters
	for _, c := range []struct {
		name, method, path string
		body               map[string]any
		want               int
		attr               string
	}{
		{"note at the limit", "POST", notes, map[string]any{"body": long(MaxNoteChars)}, 201, ""},
		{"note over", "POST", notes, map[string]any{"body": long(MaxNoteChars + 1)}, 400, "note"},
		{"note edit over", "PUT", notePath, map[string]any{"body": long(MaxNoteChars + 1)}, 400, "note"},
		{"title over", "POST", mrs, newMR(long(MaxTitleChars+1), ""), 400, "title"},
		{"description over", "POST", mrs, newMR("t", long(MaxDescriptionChars+1)), 400, "description"},
		{"title edit over", "PUT", mrPath(e, mr, ""), map[string]any{"title": long(MaxTitleChars + 1)}, 400, "title"},
		{"description edit over", "PUT", mrPath(e, mr, ""), map[string]any{"description": long(MaxDescriptionChars + 1)}, 400, "description"},
		{"at the limits", "POST", mrs, newMR(long(MaxTitleChars), long(MaxDescriptionChars)), 201, ""},
	} {
		st, _, b := e.call(c.method, c.path, robotToken, c.body)
		if st != c.want || (c.attr != "" && !strings.Contains(string(b), `"`+c.attr+`":["is too long (maximum is`)) {
			t.Errorf("%s: %d %.200s, want %d naming %q", c.name, st, b, c.want, c.attr)
		}
	}
	snap, _ := e.srv.MergeRequest(e.proj.ID, int64(mr["iid"].(float64)))
	if snap.Title != "Change feature" {
		t.Errorf("a refused edit changed the title: %.40q", snap.Title)
	}
	for _, n := range snap.Notes {
		if n.ID == int64(note["id"].(float64)) && n.Body != "status" {
			t.Errorf("a refused edit changed the note: %.40q", n.Body)
		}
	}
}
