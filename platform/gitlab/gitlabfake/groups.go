package gitlabfake

import (
	"net/http"
	"net/url"
	"strconv"
)

// group is a GitLab group with direct members (no subgroups).
type group struct {
	id      int64
	path    string
	members map[int64]int // user id -> access level
}

// AddGroup adds a group with members (username -> access level) and
// returns its id. GET /groups/:id/members/all/:user_id answers for it, :id
// being the id or the URL-encoded path (doc/api/members.md).
func (s *Server) AddGroup(path string, members map[string]int) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups == nil {
		s.groups = map[int64]*group{}
	}
	g := &group{id: int64(900 + len(s.groups) + 1), path: path, members: map[int64]int{}}
	for name, level := range members {
		g.members[s.userByName(name).id] = level
	}
	s.groups[g.id] = g
	return g.id
}

// getGroupMember serves GET /groups/:id/members/all/:user_id.
func (s *Server) getGroupMember(rc *reqCtx) {
	key := rc.params["id"]
	var g *group
	for _, cand := range s.groups {
		if p, _ := url.PathUnescape(key); strconv.FormatInt(cand.id, 10) == key || cand.path == p {
			g = cand
		}
	}
	if g == nil {
		rc.fail(http.StatusNotFound, "404 Group Not Found")
		return
	}
	id, _ := strconv.ParseInt(rc.params["user_id"], 10, 64)
	u := s.users[id]
	level := g.members[id]
	if u == nil || level == 0 {
		rc.fail(http.StatusNotFound, "404 Not found")
		return
	}
	m := s.userBasic(u)
	m["access_level"] = level
	m["created_at"] = restTime(u.created)
	m["expires_at"] = nil
	rc.writeJSON(http.StatusOK, m)
}
