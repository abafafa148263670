package githubfake

import (
	"encoding/json"
	"net/http"
	"strings"
)

// FakeCommentsPath is the pattern of the one endpoint the fake serves
// beside GitHub's API, for a person trying changebot out (`changebot demo
// -keep`):
//
//	POST /-/fake/repos/{owner}/{repo}/issues/{number}/comments
//	{"login": "dave", "body": "/retry"}
//
// comments on pull request #number as login, without a token, exactly as
// AddComment does (the issue_comment webhook is sent). Answers: 201
// {"id", "body", "user": {"login"}}; 400 {"message"} naming a missing or
// malformed field; 404 when the repository, the pull request or the user
// does not exist.
const FakeCommentsPath = "/-/fake/repos/{owner}/{repo}/issues/{number}/comments"

// serveFake answers FakeCommentsPath (under the lock).
func (s *Server) serveFake(w http.ResponseWriter, r *http.Request, raw []byte) {
	rc := &reqCtx{s: s, w: w, r: r}
	params, ok := matchRoute(FakeCommentsPath, r.URL.EscapedPath())
	if !ok {
		rc.fail(http.StatusNotFound, "the fake serves POST "+FakeCommentsPath)
		return
	}
	if r.Method != http.MethodPost {
		rc.fail(http.StatusMethodNotAllowed, "use POST")
		return
	}
	var in struct {
		Login string `json:"login"`
		Body  string `json:"body"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		rc.fail(http.StatusBadRequest, `body must be JSON {"login", "body"}: `+err.Error())
		return
	}
	switch {
	case strings.TrimSpace(in.Login) == "":
		rc.fail(http.StatusBadRequest, "login is missing")
		return
	case strings.TrimSpace(in.Body) == "":
		rc.fail(http.StatusBadRequest, "body is missing")
		return
	}
	rc.params = params
	r2 := s.byName[strings.ToLower(params["owner"]+"/"+params["repo"])]
	u := s.byLogin[in.Login]
	if r2 == nil || u == nil {
		rc.fail(http.StatusNotFound, "no such repository or user")
		return
	}
	pr := r2.pulls[rc.intParam("number")]
	if pr == nil {
		rc.fail(http.StatusNotFound, "no such pull request")
		return
	}
	c := s.addComment(r2, pr, u, in.Body)
	rc.json(http.StatusCreated, map[string]any{"id": c.id, "body": c.body, "user": map[string]any{"login": u.Login}})
}
