package gitlab

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"changebot/platform"
)

// Endpoint names of the setup and doctor calls (see call.go).
const (
	epTokenSelf   = "token_self"
	epHooksList   = "hooks_list"
	epHookCreate  = "hook_create"
	epHookUpdate  = "hook_update"
	epHookTest    = "hook_test"
	maxHooksCount = 100 // GitLab's limit of webhooks per project (50 per group)
)

// TokenInfo reads the robot token's details (GET
// /personal_access_tokens/self, GitLab 15.5+,
// doc/api/personal_access_tokens.md). A revoked or expired token answers
// 401 (platform.ErrForbidden); a project or group access token may answer
// 404 on older GitLab versions (platform.ErrNotFound).
func (c *Client) TokenInfo(ctx context.Context) (platform.TokenInfo, error) {
	return c.tokenInfo(ctx, c.robot, "robot")
}

// ReviewerTokenInfo is TokenInfo for reviewer robot i (0-based).
func (c *Client) ReviewerTokenInfo(ctx context.Context, i int) (platform.TokenInfo, error) {
	if i < 0 || i >= len(c.reviewers) {
		return platform.TokenInfo{}, fmt.Errorf("reading reviewer %d token: only %d reviewers configured", i, len(c.reviewers))
	}
	return c.tokenInfo(ctx, c.reviewers[i], "reviewer "+strconv.Itoa(i))
}

func (c *Client) tokenInfo(ctx context.Context, api *gl.Client, who string) (platform.TokenInfo, error) {
	t, err := call(ctx, c, epTokenSelf, func(o gl.RequestOptionFunc) (*gl.PersonalAccessToken, *gl.Response, error) {
		return api.PersonalAccessTokens.GetSinglePersonalAccessToken(o)
	})
	if err != nil {
		return platform.TokenInfo{}, fmt.Errorf("reading the %s token's details: %w", who, err)
	}
	info := platform.TokenInfo{ID: t.ID, Name: t.Name, UserID: t.UserID, Scopes: t.Scopes, Active: t.Active && !t.Revoked}
	if t.ExpiresAt != nil {
		info.ExpiresAt = time.Time(*t.ExpiresAt).UTC()
	}
	return info, nil
}

// Webhooks lists the webhooks of a project (GET /projects/:id/hooks,
// Maintainer role needed) or a group (GET /groups/:id/hooks, Owner role,
// GitLab Premium), one page of 100, GitLab's own limit per project. 403
// is platform.ErrForbidden, 404 platform.ErrNotFound.
func (c *Client) Webhooks(ctx context.Context, owner platform.HookOwner) ([]platform.Webhook, error) {
	opt := gl.ListOptions{PerPage: maxHooksCount}
	var out []platform.Webhook
	if owner.Group {
		hs, err := call(ctx, c, epHooksList, func(o gl.RequestOptionFunc) ([]*gl.GroupHook, *gl.Response, error) {
			return c.robot.Groups.ListGroupHooks(owner.ID, &gl.ListGroupHooksOptions{ListOptions: opt}, o)
		})
		if err != nil {
			return nil, fmt.Errorf("listing the webhooks of %s: %w", owner, err)
		}
		for _, h := range hs {
			out = append(out, groupHook(h))
		}
		return out, nil
	}
	hs, err := call(ctx, c, epHooksList, func(o gl.RequestOptionFunc) ([]*gl.ProjectHook, *gl.Response, error) {
		return c.robot.Projects.ListProjectHooks(pidOf(owner.ID), &gl.ListProjectHooksOptions{ListOptions: opt}, o)
	})
	if err != nil {
		return nil, fmt.Errorf("listing the webhooks of %s: %w", owner, err)
	}
	for _, h := range hs {
		out = append(out, projectHook(h))
	}
	return out, nil
}

// CreateWebhook adds a webhook (POST /projects/:id/hooks or
// /groups/:id/hooks). Triggers not named in p keep GitLab's defaults
// (push events on).
func (c *Client) CreateWebhook(ctx context.Context, owner platform.HookOwner, p platform.WebhookParams) (platform.Webhook, error) {
	if owner.Group {
		opt := &gl.AddGroupHookOptions{URL: &p.URL, EnableSSLVerification: &p.EnableSSLVerification}
		setHookParams(&opt.Name, &opt.Token, &opt.MergeRequestsEvents, &opt.PipelineEvents, &opt.NoteEvents, &opt.PushEvents, p)
		h, err := call(ctx, c, epHookCreate, func(o gl.RequestOptionFunc) (*gl.GroupHook, *gl.Response, error) {
			return c.robot.Groups.AddGroupHook(owner.ID, opt, o)
		})
		if err != nil {
			return platform.Webhook{}, fmt.Errorf("adding a webhook to %s: %w", owner, err)
		}
		return groupHook(h), nil
	}
	opt := &gl.AddProjectHookOptions{URL: &p.URL, EnableSSLVerification: &p.EnableSSLVerification}
	setHookParams(&opt.Name, &opt.Token, &opt.MergeRequestsEvents, &opt.PipelineEvents, &opt.NoteEvents, &opt.PushEvents, p)
	h, err := call(ctx, c, epHookCreate, func(o gl.RequestOptionFunc) (*gl.ProjectHook, *gl.Response, error) {
		return c.robot.Projects.AddProjectHook(pidOf(owner.ID), opt, o)
	})
	if err != nil {
		return platform.Webhook{}, fmt.Errorf("adding a webhook to %s: %w", owner, err)
	}
	return projectHook(h), nil
}

// UpdateWebhook edits webhook id (PUT /projects/:id/hooks/:hook_id or
// /groups/:id/hooks/:hook_id). GitLab resets the secret when the URL
// changes and p.Token is empty.
func (c *Client) UpdateWebhook(ctx context.Context, owner platform.HookOwner, id int64, p platform.WebhookParams) (platform.Webhook, error) {
	if owner.Group {
		opt := &gl.EditGroupHookOptions{URL: &p.URL, EnableSSLVerification: &p.EnableSSLVerification}
		setHookParams(&opt.Name, &opt.Token, &opt.MergeRequestsEvents, &opt.PipelineEvents, &opt.NoteEvents, &opt.PushEvents, p)
		h, err := call(ctx, c, epHookUpdate, func(o gl.RequestOptionFunc) (*gl.GroupHook, *gl.Response, error) {
			return c.robot.Groups.EditGroupHook(owner.ID, id, opt, o)
		})
		if err != nil {
			return platform.Webhook{}, fmt.Errorf("editing webhook %d of %s: %w", id, owner, err)
		}
		return groupHook(h), nil
	}
	opt := &gl.EditProjectHookOptions{URL: &p.URL, EnableSSLVerification: &p.EnableSSLVerification}
	setHookParams(&opt.Name, &opt.Token, &opt.MergeRequestsEvents, &opt.PipelineEvents, &opt.NoteEvents, &opt.PushEvents, p)
	h, err := call(ctx, c, epHookUpdate, func(o gl.RequestOptionFunc) (*gl.ProjectHook, *gl.Response, error) {
		return c.robot.Projects.EditProjectHook(pidOf(owner.ID), id, opt, o)
	})
	if err != nil {
		return platform.Webhook{}, fmt.Errorf("editing webhook %d of %s: %w", id, owner, err)
	}
	return projectHook(h), nil
}

// TestWebhook asks GitLab to send a test event of trigger to webhook id
// now (POST .../hooks/:hook_id/test/:trigger, GitLab 16.11+,
// lib/api/hooks/trigger_test.rb). nil means GitLab sent it and the
// receiver answered 2xx; a 422 (platform.ErrInvalid) carries in its
// Message either the receiver's answer (for changebot, {"error":"invalid
// webhook token"} on a wrong secret) or why GitLab could not build the
// event ("Ensure the project has merge requests."). GitLab allows five
// tests a minute per user (429).
func (c *Client) TestWebhook(ctx context.Context, owner platform.HookOwner, id int64, trigger string) error {
	_, err := call(ctx, c, epHookTest, func(o gl.RequestOptionFunc) (struct{}, *gl.Response, error) {
		var resp *gl.Response
		var err error
		if owner.Group {
			resp, err = c.robot.Groups.TriggerTestGroupHook(owner.ID, id, gl.GroupHookTrigger(trigger), o)
		} else {
			resp, err = c.robot.Projects.TriggerTestProjectHook(pidOf(owner.ID), id, gl.ProjectHookEvent(trigger), o)
		}
		return struct{}{}, resp, err
	})
	if err != nil {
		return fmt.Errorf("testing webhook %d of %s with %s: %w", id, owner, trigger, err)
	}
	return nil
}

// ErrNoTestData reports whether a TestWebhook error means GitLab had
// nothing to build the test event from (422 "Ensure the project has …"),
// rather than a failed delivery.
func ErrNoTestData(err error) bool {
	var pe *platform.Error
	return errors.As(err, &pe) && pe.Status == 422 && strings.HasPrefix(pe.Message, "Ensure ")
}

func setHookParams(name, token **string, mr, pipeline, note, push **bool, p platform.WebhookParams) {
	if p.Name != "" {
		*name = &p.Name
	}
	if p.Token != "" {
		*token = &p.Token
	}
	for trigger, dst := range map[string]**bool{
		platform.TriggerMergeRequests: mr, platform.TriggerPipeline: pipeline,
		platform.TriggerNote: note, platform.TriggerPush: push,
	} {
		if v, ok := p.Triggers[trigger]; ok {
			*dst = &v
		}
	}
}

func pidOf(project string) any {
	if n, err := strconv.ParseInt(project, 10, 64); err == nil {
		return n
	}
	return project
}

func projectHook(h *gl.ProjectHook) platform.Webhook {
	w := platform.Webhook{ID: h.ID, URL: h.URL, Name: h.Name, EnableSSLVerification: h.EnableSSLVerification,
		AlertStatus: h.AlertStatus, Triggers: map[string]bool{
			platform.TriggerMergeRequests: h.MergeRequestsEvents, platform.TriggerPipeline: h.PipelineEvents,
			platform.TriggerNote: h.NoteEvents, platform.TriggerPush: h.PushEvents,
			"confidential_note_events": h.ConfidentialNoteEvents, "job_events": h.JobEvents,
		}}
	if h.DisabledUntil != nil {
		w.DisabledUntil = h.DisabledUntil.UTC()
	}
	return w
}

func groupHook(h *gl.GroupHook) platform.Webhook {
	return platform.Webhook{ID: h.ID, URL: h.URL, Name: h.Name, EnableSSLVerification: h.EnableSSLVerification,
		AlertStatus: h.AlertStatus, Triggers: map[string]bool{
			platform.TriggerMergeRequests: h.MergeRequestsEvents, platform.TriggerPipeline: h.PipelineEvents,
			platform.TriggerNote: h.NoteEvents, platform.TriggerPush: h.PushEvents,
			"confidential_note_events": h.ConfidentialNoteEvents, "job_events": h.JobEvents,
		}}
}
