package gitlabfake

import (
	"fmt"
	"net/http"
	"time"
)

// User identifies a user of the fake (GET /user answers its full shape).
type User struct {
	ID       int64
	Username string
}

// UserOpt customises AddUser.
type UserOpt func(*user)

// WithName sets the display name (default: the username).
func WithName(name string) UserOpt { return func(u *user) { u.name = name } }

// WithEmail sets the email shown in webhook payloads (default
// "[REDACTED]", what GitLab sends for users without a public email).
func WithEmail(email string) UserOpt { return func(u *user) { u.email = email } }

// AsBot marks the user as a bot (project or group access token user):
// "bot": true in GET /user.
func AsBot() UserOpt { return func(u *user) { u.bot = true } }

type user struct {
	id                    int64
	username, name, email string
	bot                   bool
	created               time.Time
}

// AddUser creates a user authenticated by token (sent as PRIVATE-TOKEN or
// "Authorization: Bearer <token>"). Adding an existing username replaces its
// token and keeps its id.
func (s *Server) AddUser(username, token string, opts ...UserOpt) User {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.byName[username]
	if u == nil {
		s.ids.user++
		u = &user{id: s.ids.user, username: username, name: username, email: "[REDACTED]", created: s.now()}
		s.users[u.id] = u
		s.byName[username] = u
	}
	for _, o := range opts {
		o(u)
	}
	for t, tu := range s.byToken {
		if tu == u {
			delete(s.byToken, t)
		}
	}
	if token != "" {
		s.byToken[token] = u
	}
	return User{ID: u.id, Username: u.username}
}

// userByName returns the user, creating a tokenless one on first use (for
// control methods such as AddNoteAsUser naming a user never added).
func (s *Server) userByName(name string) *user {
	if u := s.byName[name]; u != nil {
		return u
	}
	s.ids.user++
	u := &user{id: s.ids.user, username: name, name: name, email: "[REDACTED]", created: s.now()}
	s.users[u.id] = u
	s.byName[name] = u
	return u
}

func (s *Server) webURLOf(u *user) string { return s.baseURL() + "/" + u.username }

func (s *Server) avatar(u *user) string {
	return fmt.Sprintf("https://www.gravatar.com/avatar/%040x?s=80&d=identicon", u.id)
}

// userBasic is API::Entities::UserBasic (author, approved_by[].user).
func (s *Server) userBasic(u *user) map[string]any {
	return map[string]any{
		"id": u.id, "username": u.username, "name": u.name, "state": "active",
		"locked": false, "avatar_url": s.avatar(u), "web_url": s.webURLOf(u),
	}
}

// userHook is the user object of webhook payloads.
func (s *Server) userHook(u *user) map[string]any {
	return map[string]any{
		"id": u.id, "name": u.name, "username": u.username,
		"avatar_url": s.avatar(u), "email": u.email,
	}
}

// getCurrentUser serves GET /user.
func (s *Server) getCurrentUser(rc *reqCtx) {
	u := rc.user
	m := s.userBasic(u)
	m["created_at"] = restTime(u.created)
	m["bot"] = u.bot
	m["email"] = u.email
	m["public_email"] = nil
	m["is_admin"] = false
	rc.writeJSON(http.StatusOK, m)
}
