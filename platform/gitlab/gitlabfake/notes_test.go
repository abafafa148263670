package gitlabfake

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestSplitQuickActions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		cmds       []string
		rest       string
	}{
		{"only approve", "/approve", []string{"approve"}, ""},
		{"several with spaces and CRLF", "  /approve \r\n/rebase\r\n", []string{"approve", "rebase"}, ""},
		{"text kept", "/approve\nLooks good", []string{"approve"}, "Looks good"},
		{"bot command is text", "/retry", nil, "/retry"},
		{"not at line start", "please /approve", nil, "please /approve"},
		{"in a code block", "```\n/merge\n```", nil, "```\n/merge\n```"},
		{"prefix of another word", "/approved", nil, "/approved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmds, rest := splitQuickActions(tt.body)
			if fmt.Sprint(cmds) != fmt.Sprint(tt.cmds) || rest != tt.rest {
				t.Errorf("got %v %q, want %v %q", cmds, rest, tt.cmds, tt.rest)
			}
		})
	}
}

func TestNotes(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	mr := e.openMR("feature")
	e.idle()

	// Quick actions only: 202, nothing stored, the approval arrives as an MR Hook.
	st, _, b := e.call("POST", mrPath(e, mr, "/notes"), reviewerToken, map[string]any{"body": "/approve"})
	if st != 202 {
		t.Fatalf("quick action note: %d %s", st, b)
	}
	for i := range 25 {
		e.must(201, "POST", mrPath(e, mr, "/notes"), robotToken, map[string]any{"body": fmt.Sprint("note ", i)})
	}
	e.idle()
	if n := len(e.recv.find(EventMergeRequest, "approved")); n != 1 {
		t.Errorf("%d approved hooks, want 1", n)
	}
	if n := len(e.recv.find(EventNote, "create")); n != 25 {
		t.Errorf("%d note hooks, want 25 (none for the quick action)", n)
	}

	st, h, b := e.call("GET", mrPath(e, mr, "/notes"), robotToken, nil)
	var page []map[string]any
	if st != 200 || json.Unmarshal(b, &page) != nil {
		t.Fatalf("list: %d %s", st, b)
	}
	// 25 user notes + 1 system note for the approval.
	if len(page) != 20 || h.Get("X-Total") != "26" || h.Get("X-Next-Page") != "2" || h.Get("X-Total-Pages") != "2" {
		t.Errorf("page 1: %d items, X-Total %s, X-Next-Page %s", len(page), h.Get("X-Total"), h.Get("X-Next-Page"))
	}
	if page[0]["body"] != "note 24" {
		t.Errorf("default sort is desc: first %v", page[0]["body"])
	}
	_, h, b = e.call("GET", mrPath(e, mr, "/notes?sort=asc&page=2"), robotToken, nil)
	_ = json.Unmarshal(b, &page)
	if len(page) != 6 || h.Get("X-Next-Page") != "" || page[5]["body"] != "note 24" {
		t.Errorf("asc page 2: %d items, next %q", len(page), h.Get("X-Next-Page"))
	}

	// Edit by the author: Note Hook "update" with the author as user.
	first := e.must(201, "POST", mrPath(e, mr, "/notes"), robotToken, map[string]any{"body": "status v1"})
	notePath := mrPath(e, mr, "/notes/"+itoa(int64(first["id"].(float64))))
	e.must(403, "PUT", notePath, reviewerToken, map[string]any{"body": "hijack"})
	e.must(200, "PUT", notePath, robotToken, map[string]any{"body": "status v2"})
	e.must(200, "PUT", notePath, robotToken, map[string]any{"body": "status v2"}) // unchanged: no hook
	e.idle()
	upd := e.recv.find(EventNote, "update")
	if len(upd) != 1 || upd[0]["user"].(map[string]any)["username"] != "robot" ||
		upd[0]["object_attributes"].(map[string]any)["note"] != "status v2" {
		t.Errorf("update hooks: %v", upd)
	}
	if got := e.must(200, "GET", notePath, robotToken, nil); got["body"] != "status v2" || got["noteable_iid"] != float64(1) {
		t.Errorf("note after edit: %v", got)
	}
	e.must(204, "DELETE", notePath, robotToken, nil)
	e.must(404, "GET", notePath, robotToken, nil)

	// A human's note through the control API.
	n := e.srv.AddNoteAsUser(e.proj.ID, 1, "human", "/retry")
	if n.ID == 0 || n.Body != "/retry" || n.Author != "human" {
		t.Errorf("AddNoteAsUser: %+v", n)
	}
	if z := e.srv.AddNoteAsUser(e.proj.ID, 1, "human", "/close"); z.ID != 0 {
		t.Errorf("quick-action-only note stored: %+v", z)
	}
	e.idle()
	if snap, _ := e.srv.MergeRequest(e.proj.ID, 1); snap.State != "closed" {
		t.Errorf("/close left state %s", snap.State)
	}
	if len(e.recv.find(EventMergeRequest, "close")) != 1 {
		t.Error("no close hook after /close")
	}
}
