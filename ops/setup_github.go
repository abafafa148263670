package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"changebot/config"
	"changebot/platform"
	"changebot/platform/github"
	"changebot/webhooks"
)

// gitHubHookWriter is what setup asks GitHub (platform/github.Client).
type gitHubHookWriter interface {
	Webhooks(ctx context.Context, owner platform.HookOwner) ([]platform.Webhook, error)
	CreateWebhook(ctx context.Context, owner platform.HookOwner, p platform.WebhookParams) (platform.Webhook, error)
	UpdateWebhook(ctx context.Context, owner platform.HookOwner, id int64, p platform.WebhookParams) (platform.Webhook, error)
	PingWebhook(ctx context.Context, owner platform.HookOwner, id int64) error
}

// gitHubHookParams is the webhook the bot needs on a repository: JSON to
// CHANGEBOT_EXTERNAL_URL/webhooks/github, signed with the first of
// CHANGEBOT_WEBHOOK_SECRETS, sending webhooks.GitHubEvents.
func gitHubHookParams(cfg config.Config) platform.WebhookParams {
	triggers := map[string]bool{}
	for _, e := range webhooks.GitHubEvents {
		triggers[e] = true
	}
	return platform.WebhookParams{URL: cfg.ExternalURL + config.GitHubWebhookPath, Token: cfg.WebhookSecrets[0],
		EnableSSLVerification: strings.HasPrefix(cfg.ExternalURL, "https://"), Triggers: triggers}
}

// missingEvents lists the events of webhooks.GitHubEvents h does not send
// ("*" sends all).
func missingEvents(h platform.Webhook) []string {
	if h.Triggers["*"] {
		return nil
	}
	var out []string
	for _, e := range webhooks.GitHubEvents {
		if !h.Triggers[e] {
			out = append(out, e)
		}
	}
	return out
}

// runGitHubSetup is RunSetup on GitHub: for each repository it finds the
// webhook sending to CHANGEBOT_EXTERNAL_URL/webhooks/github, creates it
// when missing (JSON, the secret, the events of webhooks.GitHubEvents,
// active), edits it when it is inactive or misses events, and otherwise
// changes nothing. GitHub never shows a webhook's secret: an existing hook
// gets CHANGEBOT_WEBHOOK_SECRETS' first written only with Force. Unless
// NoTest it then asks GitHub to ping the hook (GitHub sends it
// asynchronously; the bot answers a correctly signed ping 200 and counts
// it, a wrongly signed one 401, both shown under the hook's Recent
// Deliveries). Organization webhooks are refused. The token is
// o.HookToken (an administrator's of the repositories) or the robot's
// credentials (an App needs the Webhooks read and write permission).
func runGitHubSetup(ctx context.Context, cfg config.Config, o SetupOpts) ([]SetupResult, error) {
	gc := GitHubConfig(cfg, o.Logger, nil, nil)
	if o.HookToken != "" {
		gc.Token, gc.App = o.HookToken, nil
	}
	gc.ReviewerTokens = nil
	client, err := github.New(gc)
	if err != nil {
		return nil, err
	}
	want := gitHubHookParams(cfg)
	var results []SetupResult
	var failed []string
	for _, owner := range o.Owners {
		r, err := gitHubSetupOne(ctx, client, owner, want, o)
		if err != nil {
			fmt.Fprintf(o.Out, "FAIL %s: %v\n", owner, err)
			failed = append(failed, owner.String())
			continue
		}
		results = append(results, r)
	}
	if len(failed) > 0 {
		return results, fmt.Errorf("setting up the webhook of %s failed", strings.Join(failed, ", "))
	}
	return results, nil
}

func gitHubSetupOne(ctx context.Context, gh gitHubHookWriter, owner platform.HookOwner, want platform.WebhookParams, o SetupOpts) (SetupResult, error) {
	r := SetupResult{Owner: owner}
	hooks, err := gh.Webhooks(ctx, owner)
	if err != nil {
		return r, gitHubHookAccessHint(owner, err)
	}
	events := strings.Join(webhooks.GitHubEvents, ", ")
	i := slices.IndexFunc(hooks, func(h platform.Webhook) bool { return h.URL == want.URL })
	var h platform.Webhook
	switch {
	case i < 0:
		if h, err = gh.CreateWebhook(ctx, owner, want); err != nil {
			return r, gitHubHookAccessHint(owner, err)
		}
		r.Action = SetupCreated
		fmt.Fprintf(o.Out, "%s: created webhook %d sending %s to %s\n", owner, h.ID, events, want.URL)
	case len(missingEvents(hooks[i])) > 0 || hooks[i].AlertStatus != platform.WebhookExecutable || o.Force:
		why := []string{}
		if m := missingEvents(hooks[i]); len(m) > 0 {
			why = append(why, "events "+strings.Join(m, ", ")+" added")
		}
		if hooks[i].AlertStatus != platform.WebhookExecutable {
			why = append(why, "made active")
		}
		if o.Force {
			why = append(why, "secret written")
		} else {
			want.Token = "" // GitHub keeps the secret it has
		}
		if h, err = gh.UpdateWebhook(ctx, owner, hooks[i].ID, want); err != nil {
			return r, gitHubHookAccessHint(owner, err)
		}
		r.Action = SetupUpdated
		fmt.Fprintf(o.Out, "%s: updated webhook %d (%s)\n", owner, h.ID, strings.Join(why, "; "))
	default:
		h = hooks[i]
		r.Action = SetupUnchanged
		fmt.Fprintf(o.Out, "%s: webhook %d already sends %s to %s: no change (GitHub does not show its secret: -force writes the first of CHANGEBOT_WEBHOOK_SECRETS)\n",
			owner, h.ID, events, want.URL)
	}
	r.HookID = h.ID
	if o.NoTest {
		return r, nil
	}
	if err := gh.PingWebhook(ctx, owner, h.ID); err != nil {
		return r, fmt.Errorf("asking GitHub to ping webhook %d: %w", h.ID, err)
	}
	fmt.Fprintf(o.Out, "%s: GitHub pings webhook %d now; its Recent Deliveries show the bot's answer (200: the secret matches, 401: it does not)\n", owner, h.ID)
	return r, nil
}

// gitHubHookAccessHint explains a refused webhook read or write.
func gitHubHookAccessHint(owner platform.HookOwner, err error) error {
	if errors.Is(err, platform.ErrNotFound) || errors.Is(err, platform.ErrForbidden) {
		return fmt.Errorf("%w — managing the webhooks of %s needs an administrator of the repository (-hook-token-file) or an App with the Webhooks permission", err, owner)
	}
	return err
}
