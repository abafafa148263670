package githubfake

import (
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Hook is a repository webhook as tests see it (its secret included,
// which GitHub never answers).
type Hook struct {
	ID          int64
	URL         string
	ContentType string
	Secret      string
	Events      []string
	Active      bool
	// InsecureSSL is config.insecure_ssl: "0" verifies TLS (the default),
	// "1" does not.
	InsecureSSL string
	Pings       int

	created, updated time.Time
}

// hookTable holds the repository webhooks (GET/POST/PATCH
// /repos/{o}/{r}/hooks). They are configuration only: deliveries still go
// to Options.WebhookURL, signed with Options.WebhookSecret.
type hookTable struct {
	byRepo map[int64][]*Hook
	next   int64
}

// RepoHooks returns repository repoID's webhooks.
func (s *Server) RepoHooks(repoID int64) []Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Hook
	for _, h := range s.hookTab.byRepo[repoID] {
		c := *h
		c.Events = slices.Clone(h.Events)
		out = append(out, c)
	}
	return out
}

// AddRepoHook adds a webhook to repository repoID as an administrator
// would in its settings.
func (s *Server) AddRepoHook(repoID int64, h Hook) Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.addHook(repoID, h)
}

func (s *Server) addHook(repoID int64, h Hook) *Hook {
	if s.hookTab.byRepo == nil {
		s.hookTab.byRepo = map[int64][]*Hook{}
	}
	s.hookTab.next++
	h.ID = 400000 + s.hookTab.next
	if h.InsecureSSL == "" {
		h.InsecureSSL = "0"
	}
	h.created, h.updated = s.now().UTC(), s.now().UTC()
	s.hookTab.byRepo[repoID] = append(s.hookTab.byRepo[repoID], &h)
	return &h
}

// canAdmin answers 404 (as GitHub does for webhooks a caller may not
// manage) and reports false unless the caller administers r or is an
// App's bot.
func (rc *reqCtx) canAdmin(r *repo) bool {
	if rc.caller != nil && (rc.caller.Type == "Bot" || r.permissionOf(rc.caller) == "admin") {
		return true
	}
	rc.fail(http.StatusNotFound, "Not Found")
	return false
}

// hookJSON is the REST shape of a repository webhook (docs.github.com
// "List repository webhooks"; the hook object of fixture
// webhook-ping-repo.json): the secret is masked.
func (s *Server) hookJSON(r *repo, h *Hook) map[string]any {
	cfg := map[string]any{"url": h.URL, "content_type": h.ContentType, "insecure_ssl": h.InsecureSSL}
	if h.Secret != "" {
		cfg["secret"] = "********"
	}
	api := s.repoAPI(r) + "/hooks/" + strconv.FormatInt(h.ID, 10)
	return map[string]any{"type": "Repository", "id": h.ID, "name": "web", "active": h.Active,
		"events": h.Events, "config": cfg, "created_at": ts(h.created), "updated_at": ts(h.updated),
		"url": api, "test_url": api + "/test", "ping_url": api + "/pings", "deliveries_url": api + "/deliveries",
		"last_response": map[string]any{"code": nil, "status": "unused", "message": nil}}
}

func (s *Server) listHooks(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil || !rc.canAdmin(r) {
		return
	}
	out := []any{}
	for _, h := range s.hookTab.byRepo[r.ID] {
		out = append(out, s.hookJSON(r, h))
	}
	rc.json(http.StatusOK, out)
}

// hookFields applies the body of a create or edit to h.
func (rc *reqCtx) hookFields(h *Hook) {
	if cfg, ok := rc.body["config"].(map[string]any); ok {
		if v, ok := cfg["url"].(string); ok {
			h.URL = v
		}
		if v, ok := cfg["content_type"].(string); ok {
			h.ContentType = v
		}
		if v, ok := cfg["secret"].(string); ok {
			h.Secret = v
		}
		switch v := cfg["insecure_ssl"].(type) { // GitHub takes a string or a number
		case string:
			h.InsecureSSL = v
		case float64:
			h.InsecureSSL = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	if evs, ok := rc.body["events"].([]any); ok {
		h.Events = nil
		for _, e := range evs {
			if s, ok := e.(string); ok {
				h.Events = append(h.Events, s)
			}
		}
	}
	if v, ok := rc.body["active"].(bool); ok {
		h.Active = v
	}
	h.updated = rc.s.now().UTC()
}

func (s *Server) createHook(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil || !rc.canAdmin(r) {
		return
	}
	h := Hook{ContentType: "form", Events: []string{"push"}, Active: true}
	rc.hookFields(&h)
	if h.URL == "" {
		rc.invalid("Hook", "url", "missing_field", "")
		return
	}
	rc.json(http.StatusCreated, s.hookJSON(r, s.addHook(r.ID, h)))
}

func (s *Server) hookOf(rc *reqCtx) (*repo, *Hook) {
	r := s.repoOf(rc)
	if r == nil || !rc.canAdmin(r) {
		return nil, nil
	}
	for _, h := range s.hookTab.byRepo[r.ID] {
		if h.ID == rc.intParam("id") {
			return r, h
		}
	}
	rc.fail(http.StatusNotFound, "Not Found")
	return nil, nil
}

func (s *Server) editHook(rc *reqCtx) {
	if r, h := s.hookOf(rc); h != nil {
		rc.hookFields(h)
		rc.json(http.StatusOK, s.hookJSON(r, h))
	}
}

// pingHook answers 204 and sends a ping event (to Options.WebhookURL).
func (s *Server) pingHook(rc *reqCtx) {
	r, h := s.hookOf(rc)
	if h == nil {
		return
	}
	h.Pings++
	p := map[string]any{"zen": "Keep it logically awesome.", "hook_id": h.ID, "hook": s.hookJSON(r, h),
		"repository": s.repoJSON(r), "sender": s.userJSON(rc.caller)}
	s.emit("ping", p)
	rc.json(http.StatusNoContent, nil)
}
