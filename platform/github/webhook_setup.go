package github

import (
	"context"
	"errors"
	"fmt"
	"slices"

	gh "github.com/google/go-github/v93/github"

	"changebot/platform"
)

// Endpoint names of the repository webhook calls (doctor and setup).
const (
	epHooksList  = "repo_hooks_list"
	epHookCreate = "repo_hook_create"
	epHookEdit   = "repo_hook_edit"
	epHookPing   = "repo_hook_ping"
)

// errOrgHooks refuses a group owner: changebot reads and writes repository
// webhooks only (an App's own webhook is configured on the App).
var errOrgHooks = errors.New("organization webhooks are not supported: use the repository's webhook or the App's")

// hookRepo resolves owner (a repository "owner/name" or numeric id).
func (c *Client) hookRepo(ctx context.Context, owner platform.HookOwner) (repoRef, error) {
	if owner.Group {
		return repoRef{}, fmt.Errorf("webhooks of %s: %w: %w", owner, platform.ErrInvalid, errOrgHooks)
	}
	p, err := c.Project(ctx, owner.ID)
	if err != nil {
		return repoRef{}, fmt.Errorf("webhooks of %s: %w", owner, err)
	}
	return c.repo(ctx, p.ID)
}

// Webhooks lists the repository's webhooks (GET /repos/{o}/{r}/hooks,
// docs.github.com "List repository webhooks"; needs admin on the
// repository, or an App's "Webhooks" read permission): URL is
// config.url, Name "web", Triggers the subscribed event names
// (X-GitHub-Event values, "*" for all), EnableSSLVerification
// config.insecure_ssl "0", AlertStatus WebhookExecutable when active
// else WebhookDisabled. GitHub never answers the secret.
func (c *Client) Webhooks(ctx context.Context, owner platform.HookOwner) ([]platform.Webhook, error) {
	r, err := c.hookRepo(ctx, owner)
	if err != nil {
		return nil, err
	}
	var out []platform.Webhook
	opts := &gh.ListOptions{PerPage: pageSize, Page: 1}
	for range maxPages {
		hooks, resp, err := callResp(ctx, c, epHooksList, func(ctx context.Context) ([]*gh.Hook, *gh.Response, error) {
			return c.robot.Repositories.ListHooks(ctx, r.owner, r.name, opts)
		})
		if err != nil {
			return nil, fmt.Errorf("listing the webhooks of %s: %w", r, err)
		}
		for _, h := range hooks {
			out = append(out, toWebhook(h))
		}
		if resp == nil || resp.NextPage == 0 || resp.NextPage <= opts.Page {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
	return out, nil
}

// CreateWebhook creates an active JSON webhook on the repository (POST
// /repos/{o}/{r}/hooks) sending the events named true in p.Triggers to
// p.URL, signed with p.Token as its secret.
func (c *Client) CreateWebhook(ctx context.Context, owner platform.HookOwner, p platform.WebhookParams) (platform.Webhook, error) {
	r, err := c.hookRepo(ctx, owner)
	if err != nil {
		return platform.Webhook{}, err
	}
	h, err := call(ctx, c, epHookCreate, func(ctx context.Context) (*gh.Hook, *gh.Response, error) {
		return c.robot.Repositories.CreateHook(ctx, r.owner, r.name, hookOf(p))
	})
	if err != nil {
		return platform.Webhook{}, fmt.Errorf("creating a webhook of %s: %w", r, err)
	}
	return toWebhook(h), nil
}

// UpdateWebhook edits webhook id of the repository (PATCH
// /repos/{o}/{r}/hooks/{id}): URL, content type JSON, TLS verification,
// the secret when p.Token is set, active, and the events: GitHub replaces
// the list, so it becomes exactly the triggers named true in p.Triggers.
func (c *Client) UpdateWebhook(ctx context.Context, owner platform.HookOwner, id int64, p platform.WebhookParams) (platform.Webhook, error) {
	r, err := c.hookRepo(ctx, owner)
	if err != nil {
		return platform.Webhook{}, err
	}
	h, err := call(ctx, c, epHookEdit, func(ctx context.Context) (*gh.Hook, *gh.Response, error) {
		return c.robot.Repositories.EditHook(ctx, r.owner, r.name, id, hookOf(p))
	})
	if err != nil {
		return platform.Webhook{}, fmt.Errorf("editing webhook %d of %s: %w", id, r, err)
	}
	return toWebhook(h), nil
}

// PingWebhook asks GitHub to send webhook id a ping event (POST
// /repos/{o}/{r}/hooks/{id}/pings); GitHub answers 204 and sends it
// asynchronously.
func (c *Client) PingWebhook(ctx context.Context, owner platform.HookOwner, id int64) error {
	r, err := c.hookRepo(ctx, owner)
	if err != nil {
		return err
	}
	_, err = call(ctx, c, epHookPing, func(ctx context.Context) (struct{}, *gh.Response, error) {
		resp, err := c.robot.Repositories.PingHook(ctx, r.owner, r.name, id)
		return struct{}{}, resp, err
	})
	if err != nil {
		return fmt.Errorf("pinging webhook %d of %s: %w", id, r, err)
	}
	return nil
}

func hookOf(p platform.WebhookParams) *gh.Hook {
	var events []string
	for e, on := range p.Triggers {
		if on {
			events = append(events, e)
		}
	}
	slices.Sort(events)
	insecure := "1"
	if p.EnableSSLVerification {
		insecure = "0"
	}
	cfg := &gh.HookConfig{URL: new(p.URL), ContentType: new("json"), InsecureSSL: new(insecure)}
	if p.Token != "" {
		cfg.Secret = new(p.Token)
	}
	return &gh.Hook{Name: new("web"), Config: cfg, Events: events, Active: new(true)}
}

func toWebhook(h *gh.Hook) platform.Webhook {
	w := platform.Webhook{ID: h.GetID(), Name: h.GetName(), Triggers: map[string]bool{}, AlertStatus: platform.WebhookDisabled}
	if cfg := h.GetConfig(); cfg != nil {
		w.URL = cfg.GetURL()
		w.EnableSSLVerification = cfg.GetInsecureSSL() != "1"
	}
	for _, e := range h.Events {
		w.Triggers[e] = true
	}
	if h.GetActive() {
		w.AlertStatus = platform.WebhookExecutable
	}
	return w
}
