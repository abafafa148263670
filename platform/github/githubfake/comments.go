package githubfake

import (
	"net/http"
	"slices"
	"time"
)

type comment struct {
	id      int64
	number  int64
	user    *user
	body    string
	created time.Time
	updated time.Time
}

// Comment is an issue comment as tests see it.
type Comment struct {
	ID     int64
	Number int64
	Login  string
	Body   string
}

// AddComment comments on pull request #number as login (a person typing a
// command) and emits its issue_comment webhook.
func (s *Server) AddComment(repoID, number int64, login, body string) Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	c := s.addComment(r, r.pulls[number], s.byLogin[login], body)
	return Comment{ID: c.id, Number: number, Login: login, Body: body}
}

// Comments returns the comments of pull request #number, oldest first.
func (s *Server) Comments(repoID, number int64) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.repos[repoID].sortedComments(number) {
		out = append(out, Comment{ID: c.id, Number: c.number, Login: c.user.Login, Body: c.body})
	}
	return out
}

func (r *repo) sortedComments(number int64) []*comment {
	var out []*comment
	for _, c := range r.comments {
		if c.number == number {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *comment) int { return int(a.id - b.id) })
	return out
}

func (s *Server) addComment(r *repo, pr *pull, u *user, body string) *comment {
	s.ids.comment++
	now := s.now().UTC()
	c := &comment{id: s.ids.comment, number: pr.number, user: u, body: body, created: now, updated: now}
	r.comments[c.id] = c
	s.emitComment(r, pr, c, "created", nil)
	return c
}

// listComments answers GET .../issues/{n}/comments, oldest first (fixture
// api-issues-list-comments.json).
func (s *Server) listComments(rc *reqCtx) {
	r, pr := s.pullOf(rc)
	if pr == nil {
		return
	}
	var out []any
	for _, c := range r.sortedComments(pr.number) {
		out = append(out, s.commentJSON(r, c))
	}
	rc.json(http.StatusOK, append([]any{}, paginate(rc, out, 30)...))
}

// createComment answers POST .../issues/{n}/comments (fixtures
// api-issues-comment-request.json, api-issues-comment.json); a body over
// MaxBodyChars answers 422.
func (s *Server) createComment(rc *reqCtx) {
	r, pr := s.pullOf(rc)
	if pr == nil {
		return
	}
	if rc.str("body") == "" {
		rc.invalid("IssueComment", "body", "missing_field", "")
		return
	}
	if !rc.bodyWithinLimit("IssueComment") {
		return
	}
	c := s.addComment(r, pr, rc.caller, rc.str("body"))
	rc.json(http.StatusCreated, s.commentJSON(r, c))
}

func (s *Server) commentOf(rc *reqCtx) (*repo, *comment) {
	r := s.repoOf(rc)
	if r == nil {
		return nil, nil
	}
	c := r.comments[rc.intParam("id")]
	if c == nil {
		rc.fail(http.StatusNotFound, "Not Found")
		return nil, nil
	}
	return r, c
}

func (s *Server) getComment(rc *reqCtx) {
	if r, c := s.commentOf(rc); c != nil {
		rc.json(http.StatusOK, s.commentJSON(r, c))
	}
}

// updateComment answers PATCH .../issues/comments/{id}: only its author
// (or a writer) may edit it, with a body of at most MaxBodyChars.
func (s *Server) updateComment(rc *reqCtx) {
	r, c := s.commentOf(rc)
	if c == nil {
		return
	}
	if c.user != rc.caller && !rc.canWrite(r) {
		return
	}
	if !rc.bodyWithinLimit("IssueComment") {
		return
	}
	old := c.body
	c.body, c.updated = rc.str("body"), s.now().UTC()
	s.emitComment(r, r.pulls[c.number], c, "edited", map[string]any{"body": map[string]any{"from": old}})
	rc.json(http.StatusOK, s.commentJSON(r, c))
}
