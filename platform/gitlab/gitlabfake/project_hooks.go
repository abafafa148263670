package gitlabfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Webhook configuration through the REST API (doc/api/project_webhooks.md,
// doc/api/group_webhooks.md; fixture api-project-hook-get.json): hooks are
// state that `changebot setup` writes and `changebot doctor` reads.
//
// Deliberate differences from GitLab:
//   - events are still delivered to Options.WebhookURL alone; a hook added
//     here receives only its test events (POST .../hooks/:hook_id/test/:trigger),
//     sent at once and synchronously, as GitLab's test endpoint does;
//   - failed deliveries never disable a hook by themselves: DisableHook
//     scripts what GitLab's auto-disabling would show; a test answered 2xx
//     re-enables it, as GitLab does;
//   - the test endpoint has no rate limit (GitLab: five a minute per user).

// Hook trigger names, the boolean attributes of a hook and the :trigger of
// the test endpoint (doc/api/project_webhooks.md).
const (
	TriggerPush           = "push_events"
	TriggerMergeRequests  = "merge_requests_events"
	TriggerNote           = "note_events"
	TriggerPipeline       = "pipeline_events"
	TriggerJob            = "job_events"
	TriggerConfidentialNt = "confidential_note_events"
)

// hookTriggers are the boolean trigger attributes a hook answers with.
var hookTriggers = []string{
	"push_events", "tag_push_events", "issues_events", "confidential_issues_events",
	"merge_requests_events", "note_events", "confidential_note_events", "job_events",
	"pipeline_events", "wiki_page_events", "deployment_events", "releases_events",
	"feature_flag_events", "emoji_events", "resource_access_token_events", "repository_update_events",
}

// Hook alert statuses (alert_status; GitLab's WebHooks::AutoDisabling).
const (
	HookExecutable          = "executable"
	HookTemporarilyDisabled = "temporarily_disabled"
	HookDisabled            = "disabled"
)

// HookSpec describes a webhook for AddProjectHook and AddGroupHook.
type HookSpec struct {
	// URL receives the hook's (test) deliveries. Required.
	URL string
	// Token is the secret sent as X-Gitlab-Token; GitLab never answers it.
	Token string
	// Name is the hook's name (GitLab 17.1+).
	Name string
	// Triggers are the enabled trigger attributes, for example
	// TriggerMergeRequests.
	Triggers []string
	// EnableSSLVerification is enable_ssl_verification.
	EnableSSLVerification bool
}

// Hook is a stored webhook as a test sees it, token included.
type Hook struct {
	ID int64
	HookSpec
	// ProjectID or GroupID is the owner; the other is 0.
	ProjectID, GroupID int64
	// AlertStatus is HookExecutable, HookTemporarilyDisabled or HookDisabled.
	AlertStatus string
	// DisabledUntil is set while temporarily disabled.
	DisabledUntil time.Time
	// Tests counts the test events sent to it.
	Tests int
}

type webhook struct {
	Hook
	created time.Time
}

// hookState is the webhook configuration of every project and group.
type hookState struct {
	byID   map[int64]*webhook
	nextID int64
}

// AddProjectHook stores a project webhook as if created in GitLab's UI and
// returns it.
func (s *Server) AddProjectHook(projectID int64, spec HookSpec) Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addHook(&webhook{Hook: Hook{HookSpec: spec, ProjectID: projectID}}).Hook
}

// AddGroupHook stores a group webhook (GitLab Premium) and returns it.
func (s *Server) AddGroupHook(groupID int64, spec HookSpec) Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addHook(&webhook{Hook: Hook{HookSpec: spec, GroupID: groupID}}).Hook
}

func (s *Server) addHook(h *webhook) *webhook {
	if s.webhooks.byID == nil {
		s.webhooks.byID = map[int64]*webhook{}
		s.webhooks.nextID = 700
	}
	s.webhooks.nextID++
	h.ID = s.webhooks.nextID
	h.AlertStatus = HookExecutable
	h.created = s.now()
	h.Triggers = slices.Clone(h.Triggers)
	s.webhooks.byID[h.ID] = h
	return h
}

// ProjectHooks returns the project's webhooks, oldest first.
func (s *Server) ProjectHooks(projectID int64) []Hook {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Hook
	for _, h := range s.hooksOf(projectID, 0) {
		out = append(out, h.Hook)
	}
	return out
}

// DisableHook scripts GitLab's auto-disabling after failed deliveries:
// until zero means disabled for good (alert_status "disabled"), otherwise
// "temporarily_disabled" with disabled_until.
func (s *Server) DisableHook(hookID int64, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.webhooks.byID[hookID]
	if h == nil {
		return
	}
	h.DisabledUntil = until
	h.AlertStatus = HookTemporarilyDisabled
	if until.IsZero() {
		h.AlertStatus = HookDisabled
	}
}

func (s *Server) hooksOf(projectID, groupID int64) []*webhook {
	var out []*webhook
	for _, h := range s.webhooks.byID {
		if h.ProjectID == projectID && h.GroupID == groupID {
			out = append(out, h)
		}
	}
	sortByID(out, func(h *webhook) int64 { return h.ID }, false)
	return out
}

// hookJSON is API::Entities::ProjectHook / GroupHook (fixture
// api-project-hook-get.json); the token is never included.
func (s *Server) hookJSON(h *webhook) map[string]any {
	m := map[string]any{
		"id": h.ID, "url": h.URL, "name": h.Name, "description": "",
		"push_events_branch_filter": "", "branch_filter_strategy": "wildcard",
		"enable_ssl_verification": h.EnableSSLVerification,
		"alert_status":            h.AlertStatus, "disabled_until": timeOrNil(h.DisabledUntil),
		"url_variables": []any{}, "created_at": restTime(h.created),
		"custom_webhook_template": "", "custom_headers": []any{},
	}
	for _, t := range hookTriggers {
		m[t] = slices.Contains(h.Triggers, t)
	}
	if h.GroupID != 0 {
		m["group_id"] = h.GroupID
	} else {
		m["project_id"] = h.ProjectID
	}
	return m
}

// hookOwner resolves :id to a project (Maintainer needed, as
// :admin_web_hook) or a group (Owner needed, as :admin_group), answering
// 404 or 403 itself.
func (s *Server) hookOwner(rc *reqCtx, group bool) (projectID, groupID int64, ok bool) {
	if group {
		g := s.groupByKey(rc.params["id"])
		if g == nil {
			rc.fail(http.StatusNotFound, "404 Group Not Found")
			return 0, 0, false
		}
		if g.members[rc.user.id] < AccessOwner {
			rc.fail(http.StatusForbidden, "403 Forbidden")
			return 0, 0, false
		}
		return 0, g.id, true
	}
	p := s.project(rc)
	if p == nil || !rc.requireAccess(p, AccessMaintainer) {
		return 0, 0, false
	}
	return p.id, 0, true
}

func (s *Server) groupByKey(key string) *group {
	for _, g := range s.groups {
		if strconv.FormatInt(g.id, 10) == key || g.path == key {
			return g
		}
	}
	return nil
}

func (s *Server) ownedHook(rc *reqCtx, projectID, groupID int64) *webhook {
	id, _ := strconv.ParseInt(rc.params["hook_id"], 10, 64)
	h := s.webhooks.byID[id]
	if h == nil || h.ProjectID != projectID || h.GroupID != groupID {
		rc.fail(http.StatusNotFound, "404 Not found")
		return nil
	}
	return h
}

func (s *Server) listHooks(rc *reqCtx, group bool) {
	pid, gid, ok := s.hookOwner(rc, group)
	if !ok {
		return
	}
	items := []any{}
	for _, h := range s.hooksOf(pid, gid) {
		items = append(items, s.hookJSON(h))
	}
	rc.paginate(items)
}

func (s *Server) getHook(rc *reqCtx, group bool) {
	pid, gid, ok := s.hookOwner(rc, group)
	if !ok {
		return
	}
	if h := s.ownedHook(rc, pid, gid); h != nil {
		rc.writeJSON(http.StatusOK, s.hookJSON(h))
	}
}

// applyHookParams sets the attributes given in the request on h. On create
// GitLab's column defaults apply first: push_events and
// enable_ssl_verification true, every other trigger false.
func (rc *reqCtx) applyHookParams(h *webhook) {
	if v, ok := rc.str("name"); ok {
		h.Name = v
	}
	if v, ok := rc.str("token"); ok {
		h.Token = v
	}
	if v, ok := rc.boolean("enable_ssl_verification"); ok {
		h.EnableSSLVerification = v
	}
	for _, t := range hookTriggers {
		v, ok := rc.boolean(t)
		if !ok {
			continue
		}
		h.Triggers = slices.DeleteFunc(h.Triggers, func(x string) bool { return x == t })
		if v {
			h.Triggers = append(h.Triggers, t)
		}
	}
}

func (s *Server) createHook(rc *reqCtx, group bool) {
	pid, gid, ok := s.hookOwner(rc, group)
	if !ok {
		return
	}
	url, _ := rc.str("url")
	if url == "" {
		rc.missing("url")
		return
	}
	h := &webhook{Hook: Hook{HookSpec: HookSpec{URL: url, EnableSSLVerification: true, Triggers: []string{TriggerPush}},
		ProjectID: pid, GroupID: gid}}
	rc.applyHookParams(h)
	s.addHook(h)
	rc.writeJSON(http.StatusCreated, s.hookJSON(h))
}

// updateHook serves PUT .../hooks/:hook_id. Changing the URL without
// giving a token clears the token, as GitLab does ("When you change the
// webhook URL, the secret token is reset and not retained").
func (s *Server) updateHook(rc *reqCtx, group bool) {
	pid, gid, ok := s.hookOwner(rc, group)
	if !ok {
		return
	}
	h := s.ownedHook(rc, pid, gid)
	if h == nil {
		return
	}
	url, _ := rc.str("url")
	if url == "" {
		rc.missing("url")
		return
	}
	if url != h.URL {
		h.Token = ""
	}
	h.URL = url
	rc.applyHookParams(h)
	rc.writeJSON(http.StatusOK, s.hookJSON(h))
}

func (s *Server) deleteHook(rc *reqCtx, group bool) {
	pid, gid, ok := s.hookOwner(rc, group)
	if !ok {
		return
	}
	if h := s.ownedHook(rc, pid, gid); h != nil {
		delete(s.webhooks.byID, h.ID)
		rc.status = http.StatusNoContent
		rc.w.WriteHeader(http.StatusNoContent)
	}
}

// testHook serves POST .../hooks/:hook_id/test/:trigger (GitLab 16.11+,
// lib/api/hooks/trigger_test.rb): it builds the trigger's test payload from
// the project's newest merge request, note or pipeline (422 "Ensure the
// project has …" when there is none), POSTs it to the hook's URL with the
// hook's token, and answers 201 {"message": "201 Created"} when the
// receiver answered 2xx, else 422 {"message": <the receiver's body or the
// transport error>}. A group hook is tested with the group's first project.
func (s *Server) testHook(rc *reqCtx, group bool) {
	pid, gid, ok := s.hookOwner(rc, group)
	if !ok {
		return
	}
	h := s.ownedHook(rc, pid, gid)
	if h == nil {
		return
	}
	trigger := rc.params["trigger"]
	if !slices.Contains(hookTriggers, trigger) {
		rc.writeJSON(http.StatusBadRequest, map[string]any{"error": "trigger does not have a valid value"})
		return
	}
	p := s.projects[pid]
	if group {
		p = s.firstProjectOf(gid)
	}
	if p == nil {
		rc.fail(http.StatusUnprocessableEntity, "Ensure the group has a project with commits.")
		return
	}
	event, payload, msg := s.testPayload(p, rc.user, trigger)
	if msg != "" {
		rc.fail(http.StatusUnprocessableEntity, msg)
		return
	}
	body, _ := json.Marshal(payload)
	url, token := h.URL, h.Token
	h.Tests++
	// The receiver may call back into this server: send without the lock.
	s.mu.Unlock()
	status, answer := s.sendTest(rc.r, url, token, event, body)
	s.mu.Lock()
	if status >= 200 && status < 300 {
		if cur := s.webhooks.byID[h.ID]; cur != nil {
			cur.AlertStatus, cur.DisabledUntil = HookExecutable, time.Time{}
		}
		rc.fail(http.StatusCreated, "201 Created")
		return
	}
	rc.fail(http.StatusUnprocessableEntity, answer)
}

func (s *Server) firstProjectOf(groupID int64) *project {
	g := s.groups[groupID]
	if g == nil {
		return nil
	}
	var first *project
	for _, p := range s.projects {
		if p.namespace() == g.path && (first == nil || p.id < first.id) {
			first = p
		}
	}
	return first
}

// testPayload returns the event name and payload of a test of trigger on
// p, or the message GitLab answers when p has nothing to build it from
// (app/services/test_hooks/project_service.rb).
func (s *Server) testPayload(p *project, u *user, trigger string) (string, map[string]any, string) {
	switch trigger {
	case TriggerMergeRequests:
		mrs := p.sortedMRs()
		if len(mrs) == 0 {
			return "", nil, "Ensure the project has merge requests."
		}
		mr := mrs[len(mrs)-1]
		attrs := s.mrHookAttrs(mr)
		attrs["action"] = "open"
		return EventMergeRequest, map[string]any{
			"object_kind": "merge_request", "event_type": "merge_request",
			"user": s.userHook(u), "project": s.projectHook(p), "repository": s.repositoryHook(p),
			"object_attributes": attrs, "labels": []any{}, "changes": map[string]any{},
			"assignees": []any{}, "reviewers": []any{},
		}, ""
	case TriggerPush:
		head := p.repo.branches[p.DefaultBranch]
		return "Push Hook", map[string]any{
			"object_kind": "push", "event_name": "push", "before": head, "after": head,
			"ref": "refs/heads/" + p.DefaultBranch, "ref_protected": p.protected(p.DefaultBranch),
			"checkout_sha": head, "user_id": u.id, "user_name": u.name, "user_username": u.username,
			"project_id": p.id, "project": s.projectHook(p), "commits": []any{}, "total_commits_count": 0,
			"repository": s.repositoryHook(p),
		}, ""
	case TriggerNote:
		return "", nil, "Ensure the project has notes."
	case TriggerPipeline:
		return "", nil, "Ensure the project has CI pipelines."
	default:
		return "", nil, "Testing not available for this hook"
	}
}

// sendTest POSTs one test delivery with GitLab's headers and returns the
// receiver's status (0 on a transport error) and its body or the error.
func (s *Server) sendTest(r *http.Request, url, token, event string, body []byte) (int, string) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("X-Gitlab-Event", event)
	req.Header.Set("X-Gitlab-Instance", s.baseURL())
	req.Header.Set("X-Gitlab-Webhook-UUID", newUUID())
	req.Header.Set("X-Gitlab-Event-UUID", newUUID())
	req.Header.Set("Idempotency-Key", newUUID())
	if token != "" {
		req.Header.Set("X-Gitlab-Token", token)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	msg := strings.TrimSpace(string(b))
	if msg == "" {
		msg = fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return resp.StatusCode, msg
}

// hookRoutes are the webhook configuration endpoints, for projects and
// groups.
func hookRoutes() []routeDef {
	var out []routeDef
	for _, g := range []bool{false, true} {
		base := "/projects/:id/hooks"
		if g {
			base = "/groups/:id/hooks"
		}
		out = append(out,
			routeDef{"GET", base, func(s *Server, rc *reqCtx) { s.listHooks(rc, g) }},
			routeDef{"POST", base, func(s *Server, rc *reqCtx) { s.createHook(rc, g) }},
			routeDef{"GET", base + "/:hook_id", func(s *Server, rc *reqCtx) { s.getHook(rc, g) }},
			routeDef{"PUT", base + "/:hook_id", func(s *Server, rc *reqCtx) { s.updateHook(rc, g) }},
			routeDef{"DELETE", base + "/:hook_id", func(s *Server, rc *reqCtx) { s.deleteHook(rc, g) }},
			routeDef{"POST", base + "/:hook_id/test/:trigger", func(s *Server, rc *reqCtx) { s.testHook(rc, g) }},
		)
	}
	return out
}
