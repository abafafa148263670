package gitlabfake

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// FakeNotesPath is the pattern of the one endpoint the fake serves beside
// GitLab's API, for a person trying changebot out (`changebot demo -keep`):
//
//	POST /-/fake/projects/:id/merge_requests/:iid/notes
//	{"username": "dave", "body": "/retry"}
//
// comments on MR !iid of project :id (numeric id or URL-encoded path) as
// username, without a token, exactly as AddNoteAsUser does (quick actions
// run, the Note Hook is sent). Answers: 201 {"id", "body", "author":
// {"username"}} (id null when the body held quick actions only); 400
// {"error"} naming a missing or malformed field; 404 when the project or
// merge request does not exist.
const FakeNotesPath = "/-/fake/projects/:id/merge_requests/:iid/notes"

func (s *Server) withFakeEndpoints(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/-/fake/") {
			api.ServeHTTP(w, r)
			return
		}
		s.serveFakeNote(w, r)
	})
}

func (s *Server) serveFakeNote(w http.ResponseWriter, r *http.Request) {
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	params, ok := matchPattern(strings.Split(strings.Trim(FakeNotesPath, "/"), "/"), r.URL.EscapedPath())
	if !ok {
		reply(http.StatusNotFound, map[string]string{"error": "404 Not Found: the fake serves POST " + FakeNotesPath})
		return
	}
	if r.Method != http.MethodPost {
		reply(http.StatusMethodNotAllowed, map[string]string{"error": "405 Method Not Allowed: use POST"})
		return
	}
	var in struct {
		Username string `json:"username"`
		Body     string `json:"body"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&in); err != nil {
		reply(http.StatusBadRequest, map[string]string{"error": "body must be JSON {\"username\", \"body\"}: " + err.Error()})
		return
	}
	switch {
	case strings.TrimSpace(in.Username) == "":
		reply(http.StatusBadRequest, map[string]string{"error": "username is missing"})
		return
	case strings.TrimSpace(in.Body) == "":
		reply(http.StatusBadRequest, map[string]string{"error": "body is missing"})
		return
	}
	iid, err := strconv.ParseInt(params["iid"], 10, 64)
	if err != nil {
		reply(http.StatusBadRequest, map[string]string{"error": "iid must be a number"})
		return
	}
	s.mu.Lock()
	var pid int64
	if n, err := strconv.ParseInt(params["id"], 10, 64); err == nil {
		pid = n
	} else if p := s.byPath[strings.ToLower(params["id"])]; p != nil {
		pid = p.id
	}
	p := s.projects[pid]
	found := p != nil && p.mrs[iid] != nil
	s.mu.Unlock()
	if !found {
		reply(http.StatusNotFound, map[string]string{"error": "404 no merge request !" + params["iid"] + " in project " + params["id"]})
		return
	}
	n := s.AddNoteAsUser(pid, iid, in.Username, in.Body)
	var id any
	if n.ID != 0 {
		id = n.ID
	}
	reply(http.StatusCreated, map[string]any{"id": id, "body": n.Body, "author": map[string]any{"username": in.Username}})
}

// matchPattern matches an escaped path against pattern segments, returning
// the unescaped :params.
func matchPattern(pattern []string, escaped string) (map[string]string, bool) {
	segs := strings.Split(strings.Trim(escaped, "/"), "/")
	if len(segs) != len(pattern) {
		return nil, false
	}
	params := map[string]string{}
	for i, p := range pattern {
		seg := segs[i]
		if strings.HasPrefix(p, ":") {
			u, err := url.PathUnescape(seg)
			if err != nil {
				return nil, false
			}
			params[p[1:]] = u
		} else if p != seg {
			return nil, false
		}
	}
	return params, true
}
