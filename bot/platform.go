package bot

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"changebot/budget"
	"changebot/config"
	"changebot/ops"

	"changebot/commands"
	"changebot/flows"
	"changebot/platform/github"
	"changebot/platform/gitlab"
	"changebot/routing"
	"changebot/settings"
	"changebot/webhooks"
)

// platformClient is the adapter of the installation's platform
// (config.Config.Platform): what the flow engine and the commands ask it.
// *gitlab.Client and *github.Client implement it.
type platformClient interface {
	flows.Platform
	commands.Access
}

var (
	_ platformClient = (*gitlab.Client)(nil)
	_ platformClient = (*github.Client)(nil)
)

// newPlatformClient builds the adapter config.Config.Platform names: GitLab with
// the robot's token, or GitHub with the robot's token or as a GitHub App
// installation; the reviewer tokens are the platform's. observe counts
// every call (changebot_gitlab_calls_total, for either platform).
func (a *App) newPlatformClient(observe func(endpoint string, status int, d time.Duration)) (platformClient, error) {
	// The budget and the account waits are shared through the database, so
	// they run on its clock (issue 21 point 6), as do the adapter's waits.
	now := a.sharedClock()
	if a.cfg.Platform != config.PlatformGitHub {
		// The call budget of each GitLab account, shared by every replica
		// (issue 12 point 4); its limits are read at every take.
		calls, err := budget.New(budget.Config{Store: a.store, Registerer: a.registry, NowFunc: now,
			LimitsFunc: func() budget.Limits {
				return budget.LimitsOf(func(key string) settings.Value { return a.settings.Get(key, "") })
			}})
		if err != nil {
			return nil, err
		}
		a.calls = calls
		c, err := gitlab.New(gitlab.Config{BaseURL: a.cfg.GitLabURL, Token: a.cfg.GitLabToken,
			ReviewerTokens: a.cfg.ReviewerTokens, Logger: a.log, ObserveFunc: observe, NowFunc: now,
			// A 429's wait, shared by every replica (issue 10 point 4),
			// through the budget: a 429 drops its leased calls at once.
			AccountWaits: calls, Budget: calls,
			// approval.adapter, read at every approve: "project:<id>" (the
			// adapter knows the numeric id only), then global.
			AdapterFunc: func(projectID int64) string {
				return a.settingText(settings.ApprovalAdapter, strconv.FormatInt(projectID, 10))
			}})
		if err != nil {
			return nil, fmt.Errorf("configuring the GitLab client: %w", err)
		}
		return c, nil
	}
	// A rate limit's wait, shared by every replica as GitLab's 429 is.
	// Read at most once a second (budget.WaitCacheTTL), recorded at once.
	gc := ops.GitHubConfig(a.cfg, a.log, observe, budget.NewWaits(a.store, now))
	gc.WaitsNowFunc = now
	c, err := github.New(gc)
	if err != nil {
		return nil, fmt.Errorf("configuring the GitHub client: %w", err)
	}
	return c, nil
}

// hookDecoder is the platform's webhook decoder, used by the intake and
// by the delivery router alike.
func hookDecoder(platformName string) routing.HookDecoder {
	if platformName == config.PlatformGitHub {
		return github.DecodeHook
	}
	return gitlab.DecodeHook
}

// githubHook builds the handler of POST /webhooks/github.
func (a *App) githubHook(wm *webhooks.Metrics) (http.Handler, error) {
	return webhooks.NewGitHubHandler(webhooks.GitHubConfig{Secrets: a.cfg.WebhookSecrets, Verify: github.VerifySignature,
		Decode: github.DecodeHook, MaxBodyBytes: a.cfg.MaxBodyBytes, Store: a.store, Dispatcher: a.intakeDispatcher(), Logger: a.log, Metrics: wm,
		NoteHasCommand: commands.MayHoldCommand})
}

// sharedClock is the clock of what replicas share through the database (the
// call budget, the account waits): the database's, measured at start and
// every budget.ClockSyncInterval (App.clock), or the local clock for an
// App built without one (tests).
func (a *App) sharedClock() func() time.Time {
	if a.clock == nil {
		return time.Now
	}
	return a.clock.Now
}
