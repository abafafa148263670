package gitlabfake

import (
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Note is an MR comment as the fake stores it.
type Note struct {
	ID int64
	// Body is the stored text (quick-action lines removed).
	Body string
	// Author is the author's username.
	Author string
	// System is true for notes GitLab writes itself (approved, merged,
	// closed, added commits); they never fire Note Hooks.
	System               bool
	CreatedAt, UpdatedAt time.Time
}

type note struct {
	id               int64
	body             string
	author           *user
	system           bool
	created, updated time.Time
	mr               *mergeRequest
}

func (n *note) export() Note {
	return Note{ID: n.id, Body: n.body, Author: n.author.username, System: n.system, CreatedAt: n.created, UpdatedAt: n.updated}
}

// quickAction matches a line holding one of GitLab's own quick actions that
// the fake executes. GitLab removes such lines from the stored note.
var quickAction = regexp.MustCompile(`^/(approve|unapprove|merge|close|reopen|rebase)(\s.*)?$`)

// splitQuickActions returns the commands in body (outside fenced code) and
// the text left once their lines are removed.
func splitQuickActions(body string) (cmds []string, rest string) {
	var kept []string
	fenced := false
	for _, line := range strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "```") {
			fenced = !fenced
		}
		if m := quickAction.FindStringSubmatch(t); m != nil && !fenced {
			cmds = append(cmds, m[1])
			continue
		}
		kept = append(kept, line)
	}
	return cmds, strings.TrimSpace(strings.Join(kept, "\n"))
}

// addNote stores body by u on mr after running its quick actions, and emits
// the Note Hook "create" when a note was stored. trusted skips permission
// checks (control methods acting as a human). It returns the stored note
// (nil for a body of quick actions only) and the commands run.
func (s *Server) addNote(mr *mergeRequest, u *user, body string, trusted bool) (*note, []string) {
	cmds, rest := splitQuickActions(body)
	var n *note
	if rest != "" {
		s.ids.note++
		now := s.now()
		n = &note{id: s.ids.note, body: rest, author: u, created: now, updated: now, mr: mr}
		mr.notes = append(mr.notes, n)
		s.emitNoteHook(n, u, "create")
	}
	for _, c := range cmds {
		s.runQuickAction(mr, u, c, trusted)
	}
	return n, cmds
}

func (s *Server) runQuickAction(mr *mergeRequest, u *user, cmd string, trusted bool) {
	p := mr.p
	switch cmd {
	case "approve":
		if mr.state == stateOpened && !mr.approvedBy(u) && (trusted || s.canApprove(mr, u)) {
			s.recordApproval(mr, u)
		}
	case "unapprove":
		s.unapproveAs(mr, u)
	case "close":
		if mr.state == stateOpened {
			s.closeMR(mr, u)
		}
	case "reopen":
		if mr.state == stateClosed {
			s.reopenMR(mr, u)
		}
	case "merge":
		if (trusted || p.access(u) >= p.MergeAccessLevel) && !mr.rebaseInProgress && s.detailedStatus(mr) == "mergeable" {
			s.doMerge(mr, u, mr.squashOnMerge(false, false), mr.removeSource, "")
		}
	case "rebase":
		s.startRebase(mr, u)
	}
}

func (s *Server) addSystemNote(mr *mergeRequest, by *user, body string) {
	s.ids.note++
	now := s.now()
	mr.notes = append(mr.notes, &note{id: s.ids.note, body: body, author: by, system: true, created: now, updated: now, mr: mr})
}

// AddNoteAsUser makes username (created on first use) comment on MR !iid
// as a human: GitLab's quick actions in the body run (/approve emits the
// Merge Request Hook "approved", not a Note Hook); any other text is stored
// and emits the Note Hook "create". It returns the stored note, or a zero
// Note when the body held quick actions only or the MR does not exist.
func (s *Server) AddNoteAsUser(projectID, iid int64, username, body string) Note {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projects[projectID]
	if p == nil || p.mrs[iid] == nil {
		return Note{}
	}
	n, _ := s.addNote(p.mrs[iid], s.userByName(username), body, true)
	if n == nil {
		return Note{}
	}
	return n.export()
}

// noteJSON is API::Entities::Note (fixture api-mr-note-get.json).
func (s *Server) noteJSON(n *note) map[string]any {
	author := s.userBasic(n.author)
	author["email"] = n.author.email
	author["created_at"] = restTime(n.author.created)
	return map[string]any{
		"id": n.id, "type": nil, "body": n.body, "attachment": nil, "author": author,
		"created_at": restTime(n.created), "updated_at": restTime(n.updated),
		"system": n.system, "noteable_id": n.mr.id, "noteable_type": "MergeRequest",
		"project_id": n.mr.p.id, "noteable_iid": n.mr.iid, "resolvable": false,
		"confidential": false, "internal": false, "commands_changes": map[string]any{},
	}
}

// note resolves :note_id on the MR or answers 404.
func (s *Server) note(rc *reqCtx) (*mergeRequest, *note) {
	_, mr := s.mr(rc)
	if mr == nil {
		return nil, nil
	}
	id, _ := strconv.ParseInt(rc.params["note_id"], 10, 64)
	for _, n := range mr.notes {
		if n.id == id {
			return mr, n
		}
	}
	rc.fail(http.StatusNotFound, "404 Note Not Found")
	return nil, nil
}

// listNotes serves GET .../notes: sort asc|desc (default desc), order_by
// created_at (default) | updated_at, paginated; system notes included.
func (s *Server) listNotes(rc *reqCtx) {
	_, mr := s.mr(rc)
	if mr == nil {
		return
	}
	notes := slices.Clone(mr.notes)
	desc := rc.get("sort") != "asc"
	byUpdated := rc.get("order_by") == "updated_at"
	slices.SortStableFunc(notes, func(a, b *note) int {
		ta, tb := a.created, b.created
		if byUpdated {
			ta, tb = a.updated, b.updated
		}
		c := ta.Compare(tb)
		if c == 0 {
			c = int(a.id - b.id)
		}
		if desc {
			return -c
		}
		return c
	})
	items := make([]any, 0, len(notes))
	for _, n := range notes {
		items = append(items, s.noteJSON(n))
	}
	rc.paginate(items)
}

// createNote serves POST .../notes (body): 201 with the note; 202
// {"commands_changes": {...}, "summary": [...]} when the body held GitLab
// quick actions only (nothing stored, no Note Hook).
func (s *Server) createNote(rc *reqCtx) {
	_, mr := s.mr(rc)
	if mr == nil {
		return
	}
	body, _ := rc.str("body")
	if strings.TrimSpace(body) == "" {
		rc.missing("body")
		return
	}
	if !rc.withinLimits(noteLimit) {
		return
	}
	n, cmds := s.addNote(mr, rc.user, body, false)
	if n == nil {
		changes := map[string]any{}
		for _, c := range cmds {
			changes[c] = true
		}
		rc.writeJSON(http.StatusAccepted, map[string]any{"commands_changes": changes, "summary": cmds})
		return
	}
	rc.writeJSON(http.StatusCreated, s.noteJSON(n))
}

// getNote serves GET .../notes/:note_id.
func (s *Server) getNote(rc *reqCtx) {
	if _, n := s.note(rc); n != nil {
		rc.writeJSON(http.StatusOK, s.noteJSON(n))
	}
}

// updateNote serves PUT .../notes/:note_id (body): only the author may edit
// (403 otherwise). A changed body emits the Note Hook "update" with the
// note's author as user (GitLab 16.11+).
func (s *Server) updateNote(rc *reqCtx) {
	_, n := s.note(rc)
	if n == nil {
		return
	}
	body, ok := rc.str("body")
	if !ok {
		rc.missing("body")
		return
	}
	if n.author != rc.user || n.system {
		rc.fail(http.StatusForbidden, "403 Forbidden")
		return
	}
	if !rc.withinLimits(noteLimit) {
		return
	}
	if body != n.body {
		n.body, n.updated = body, s.now()
		s.emitNoteHook(n, n.author, "update")
	}
	rc.writeJSON(http.StatusOK, s.noteJSON(n))
}

// deleteNote serves DELETE .../notes/:note_id: the author or a Maintainer;
// 204.
func (s *Server) deleteNote(rc *reqCtx) {
	mr, n := s.note(rc)
	if n == nil {
		return
	}
	if n.author != rc.user && mr.p.access(rc.user) < AccessMaintainer {
		rc.fail(http.StatusForbidden, "403 Forbidden")
		return
	}
	mr.notes = slices.DeleteFunc(mr.notes, func(x *note) bool { return x == n })
	rc.status = http.StatusNoContent
	rc.w.WriteHeader(http.StatusNoContent)
}
