package githubfake

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// User is an account as tests see it.
type User struct {
	ID    int64
	Login string
	// Type is "User" or "Bot".
	Type string
}

type user struct {
	User
}

// App is a GitHub App as tests see it.
type App struct {
	ID   int64
	Slug string
	// InstallationID is its one installation.
	InstallationID int64
	// Bot is the App's bot user, "<slug>[bot]".
	Bot User
}

type app struct {
	App
	key *rsa.PublicKey
	bot *user
}

// AddUser adds an account whose token is tok ("" for none).
func (s *Server) AddUser(login, tok string) User {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addUser(login, tok, "User").User
}

func (s *Server) addUser(login, tok, typ string) *user {
	s.ids.user++
	u := &user{User{ID: s.ids.user, Login: login, Type: typ}}
	s.users[u.ID] = u
	s.byLogin[login] = u
	if tok != "" {
		s.tokens[tok] = &token{user: u}
	}
	return u
}

// AddApp adds a GitHub App with one installation; its JWTs must be signed
// with the private key of pub (RS256). Its bot user "<slug>[bot]" is
// created with it; installation tokens act as that user.
func (s *Server) AddApp(slug string, pub *rsa.PublicKey) App {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids.user++
	a := &app{App: App{ID: s.ids.user*10 + 1, Slug: slug, InstallationID: s.ids.user*100 + 7}, key: pub}
	a.bot = s.addUser(slug+"[bot]", "", "Bot")
	a.Bot = a.bot.User
	s.apps[a.ID] = a
	return a.App
}

// ExpireTokens makes every installation token expire now (GitHub answers
// 401 "Bad credentials" for an expired one).
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tokens {
		if t.app != nil {
			t.expires = s.now()
		}
	}
}

// InstallationTokens returns how many installation tokens were created.
func (s *Server) InstallationTokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.ids.token)
}

// AddOrgMember makes login a member of org with role "member" or "admin".
func (s *Server) AddOrgMember(org, login, role string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.orgs[org] == nil {
		s.orgs[org] = map[string]string{}
	}
	s.orgs[org][login] = role
}

// authenticate resolves the Authorization header: a token, an
// installation token or (for App routes) a JWT. It answers 401 and
// reports false when that fails.
func (rc *reqCtx) authenticate(jwtRoute bool) bool {
	h := rc.r.Header.Get("Authorization")
	tok := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(h, "Bearer "), "token "))
	if jwtRoute {
		a, err := rc.s.checkJWT(tok)
		if err != nil {
			rc.fail(http.StatusUnauthorized, "A JSON web token could not be decoded")
			rc.s.log.Debug("jwt refused", "err", err)
			return false
		}
		rc.app, rc.jwt = a, true
		return true
	}
	t := rc.s.tokens[tok]
	if tok == "" || t == nil || (!t.expires.IsZero() && !rc.s.now().Before(t.expires)) {
		rc.fail(http.StatusUnauthorized, "Bad credentials")
		return false
	}
	rc.caller, rc.app = t.user, t.app
	return true
}

// checkJWT verifies an App JWT: RS256 over header.payload with the App's
// key (iss), iat not in the future by more than a minute, exp after now
// and at most 10 minutes after iat (docs.github.com "Generating a JSON Web
// Token for a GitHub App").
func (s *Server) checkJWT(tok string) (*app, error) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a JWT")
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss any   `json:"iss"`
		Iat int64 `json:"iat"`
		Exp int64 `json:"exp"`
	}
	if err := decodeSegment(parts[0], &hdr); err != nil || hdr.Alg != "RS256" {
		return nil, fmt.Errorf("header: alg %q: %w", hdr.Alg, err)
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return nil, err
	}
	var id int64
	switch v := claims.Iss.(type) {
	case string:
		id, _ = strconv.ParseInt(v, 10, 64)
	case float64:
		id = int64(v)
	}
	a := s.apps[id]
	if a == nil {
		return nil, fmt.Errorf("unknown app %v", claims.Iss)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(a.key, crypto.SHA256, sum[:], sig); err != nil {
		return nil, err
	}
	now := s.now().Unix()
	if claims.Iat > now+60 || claims.Exp <= now || claims.Exp-claims.Iat > 600 {
		return nil, fmt.Errorf("iat %d exp %d at %d", claims.Iat, claims.Exp, now)
	}
	return a, nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func (s *Server) getAuthenticatedUser(rc *reqCtx) {
	if rc.app != nil {
		rc.fail(http.StatusForbidden, "Resource not accessible by integration")
		return
	}
	u := s.userJSON(rc.caller)
	// The private profile fields of GET /user (fixture
	// api-users-get-authenticated.json).
	for k, v := range privateUserFields() {
		u[k] = v
	}
	rc.json(http.StatusOK, u)
}

func (s *Server) getUser(rc *reqCtx) {
	u := s.byLogin[rc.param("login")]
	if u == nil {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	rc.json(http.StatusOK, s.userJSON(u))
}

func (s *Server) getUserByID(rc *reqCtx) {
	u := s.users[rc.intParam("id")]
	if u == nil {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	rc.json(http.StatusOK, s.userJSON(u))
}

func (s *Server) getApp(rc *reqCtx) {
	a := rc.app
	rc.json(http.StatusOK, map[string]any{
		"id": a.ID, "slug": a.Slug, "node_id": fmt.Sprintf("A_%d", a.ID), "name": a.Slug,
		"owner": s.userJSON(a.bot), "description": "", "external_url": s.URL(), "html_url": s.URL() + "/apps/" + a.Slug,
		"created_at": s.stamp(), "updated_at": s.stamp(), "permissions": map[string]any{}, "events": []any{},
	})
}

// installationTokenLifetime is how long an installation token lives.
const installationTokenLifetime = time.Hour

// createInstallationToken answers POST /app/installations/{id}/access_tokens
// (fixture api-apps-installation-token.json).
func (s *Server) createInstallationToken(rc *reqCtx) {
	a := rc.app
	if rc.intParam("id") != a.InstallationID {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	s.ids.token++
	tok := fmt.Sprintf("ghs_fake%d_%d", a.ID, s.ids.token)
	exp := s.now().Add(installationTokenLifetime).UTC()
	s.tokens[tok] = &token{user: a.bot, app: a, expires: exp}
	rc.json(http.StatusCreated, map[string]any{
		"token":                tok,
		"expires_at":           exp.Format(time.RFC3339),
		"permissions":          map[string]any{"contents": "write", "pull_requests": "write", "checks": "read", "statuses": "read", "issues": "write", "metadata": "read"},
		"repository_selection": "all",
		"repositories":         []any{},
	})
}

func (s *Server) getOrgMembership(rc *reqCtx) {
	role, ok := s.orgs[rc.param("org")][rc.param("login")]
	u := s.byLogin[rc.param("login")]
	if !ok || u == nil {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	org := rc.param("org")
	rc.json(http.StatusOK, map[string]any{
		"url": s.URL() + "/orgs/" + org + "/memberships/" + u.Login, "state": "active", "role": role,
		"organization_url": s.URL() + "/orgs/" + org,
		"organization":     map[string]any{"login": org, "id": 1, "url": s.URL() + "/orgs/" + org},
		"user":             s.userJSON(u),
	})
}
