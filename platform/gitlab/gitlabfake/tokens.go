package gitlabfake

import (
	"net/http"
	"slices"
	"time"
)

// Access token details (doc/api/personal_access_tokens.md; fixture
// api-pat-self.json). Every token added with AddUser is a personal access
// token with scope "api" that never expires until SetTokenInfo says
// otherwise.
//
// Deliberate difference from GitLab: an expiry date in the past is shown
// but not enforced; RevokeToken is what makes a token answer 401.

// TokenInfo is what GET /personal_access_tokens/self answers about a token.
type TokenInfo struct {
	// Name is the token's name (default "<username>-token").
	Name string
	// Scopes, default ["api"].
	Scopes []string
	// ExpiresAt is the expiry date (GitLab keeps a date, no time); zero
	// means it never expires.
	ExpiresAt time.Time
}

type tokenInfo struct {
	TokenInfo
	id      int64
	created time.Time
}

type tokenState struct {
	byToken map[string]*tokenInfo
	nextID  int64
}

// SetTokenInfo sets the details GET /personal_access_tokens/self answers
// for token; zero fields keep their defaults.
func (s *Server) SetTokenInfo(token string, info TokenInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tokenInfoOf(token)
	if info.Name != "" {
		t.Name = info.Name
	}
	if info.Scopes != nil {
		t.Scopes = slices.Clone(info.Scopes)
	}
	if !info.ExpiresAt.IsZero() {
		t.ExpiresAt = info.ExpiresAt
	}
}

// RevokeToken revokes token: every later call with it answers 401
// {"message": "401 Unauthorized"}, the user stays.
func (s *Server) RevokeToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byToken, token)
}

// SetMember sets username's access level on the project (0 removes the
// membership), creating the user on first use.
func (s *Server) SetMember(projectID int64, username string, level int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projects[projectID]
	if p == nil {
		return
	}
	s.userByName(username)
	if level == 0 {
		delete(p.Members, username)
		return
	}
	p.Members[username] = level
}

// SetMergeAccessLevel sets the role needed to merge into the project's
// protected branches (merge_access_levels; 30 Developer, 40 Maintainer).
func (s *Server) SetMergeAccessLevel(projectID int64, level int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.projects[projectID]; p != nil {
		p.MergeAccessLevel = level
	}
}

func (s *Server) tokenInfoOf(token string) *tokenInfo {
	if s.tokens.byToken == nil {
		s.tokens.byToken = map[string]*tokenInfo{}
		s.tokens.nextID = 40
	}
	t := s.tokens.byToken[token]
	if t == nil {
		s.tokens.nextID++
		name := "token"
		if u := s.byToken[token]; u != nil {
			name = u.username + "-token"
		}
		t = &tokenInfo{TokenInfo: TokenInfo{Name: name, Scopes: []string{"api"}}, id: s.tokens.nextID, created: s.now()}
		s.tokens.byToken[token] = t
	}
	return t
}

// getTokenSelf serves GET /personal_access_tokens/self (GitLab 15.5+): the
// token the request was authenticated with.
func (s *Server) getTokenSelf(rc *reqCtx) {
	t := s.tokenInfoOf(token(rc.r))
	var expires any
	if !t.ExpiresAt.IsZero() {
		expires = t.ExpiresAt.UTC().Format(time.DateOnly)
	}
	rc.writeJSON(http.StatusOK, map[string]any{
		"id": t.id, "name": t.Name, "revoked": false, "created_at": restTime(t.created),
		"description": "", "scopes": t.Scopes, "user_id": rc.user.id,
		"last_used_at": restTime(s.now()), "active": true, "expires_at": expires,
	})
}

// routeDef is one REST route: method, pattern with :params, handler.
type routeDef struct {
	method, pattern string
	handle          func(*Server, *reqCtx)
}

// adminRoutes are the routes a person or changebot's setup and doctor use
// to configure and inspect GitLab, beside the ones the flows use.
func adminRoutes() []routeDef {
	return append(hookRoutes(), routeDef{"GET", "/personal_access_tokens/self", (*Server).getTokenSelf})
}
