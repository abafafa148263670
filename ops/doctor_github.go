package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"changebot/config"
	"changebot/platform"
	"changebot/platform/github"
	"changebot/webhooks"
)

// doctorGitHub is what doctor asks GitHub, as the robot and the reviewer
// accounts (platform/github.Client).
type doctorGitHub interface {
	CurrentUser(ctx context.Context) (platform.User, error)
	ReviewerCount() int
	Reviewer(ctx context.Context, i int) (platform.User, error)
	Project(ctx context.Context, project string) (platform.Project, error)
	MemberAccess(ctx context.Context, projectID, userID int64) (int, error)
	Webhooks(ctx context.Context, owner platform.HookOwner) ([]platform.Webhook, error)
}

// runGitHubDoctor is RunDoctor on an installation with CHANGEBOT_PLATFORM
// github, after the database check: the robot's credentials (a token or
// the GitHub App installation) answer; each reviewer token is of its own
// account, not the robot's; for each repository: the robot (a token's
// user) and each reviewer have write permission (pushing and merging need
// it, and a review counts towards required approvals only from an account
// with write access), and a webhook sends the needed events to
// CHANGEBOT_EXTERNAL_URL/webhooks/github and is active (read with
// hookToken when set: reading webhooks needs an administrator or an App
// with the Webhooks permission; GitHub never shows the secret); then the
// approval system.
func (d *doctor) runGitHubDoctor(ctx context.Context, log *slog.Logger, hookToken string) {
	client, err := github.New(GitHubConfig(d.cfg, log, nil, nil))
	if err != nil {
		d.fail("GitHub client: "+err.Error(),
			"fix CHANGEBOT_GITHUB_URL, CHANGEBOT_GITHUB_TOKEN (or the three CHANGEBOT_GITHUB_APP_* settings) and CHANGEBOT_REVIEWER_TOKENS")
		return
	}
	var hooks doctorGitHub = client
	if hookToken != "" {
		hc := GitHubConfig(d.cfg, log, nil, nil)
		hc.Token, hc.App, hc.ReviewerTokens = hookToken, nil, nil
		if hooks, err = github.New(hc); err != nil {
			d.fail("webhook reader token: "+err.Error(), "give a non-empty token file")
			return
		}
	}
	d.checkGitHubRobot(ctx, client)
	d.checkGitHubReviewers(ctx, client)
	if hookToken != "" {
		d.checkHookToken(ctx, "GitHub", "of a repository administrator", hooks.CurrentUser)
	}
	for _, p := range d.projects {
		d.checkGitHubRepository(ctx, client, hooks, p)
	}
	d.checkApprovalURL(ctx)
}

// gitHubFinding turns a failed GitHub read with who's credentials into
// its check.
func (d *doctor) gitHubFinding(what, env string, err error) {
	if errors.Is(err, platform.ErrForbidden) {
		d.fail(what+": GitHub refused the credentials (401/403): revoked, expired or mistyped", "give a valid one in "+env)
		return
	}
	api := d.cfg.GitHubURL
	if api == "" {
		api = "https://api.github.com"
	}
	d.fail(fmt.Sprintf("%s: GitHub at %s did not answer (%v)", what, api, err),
		"check CHANGEBOT_GITHUB_URL and that GitHub is reachable from here")
}

func (d *doctor) checkGitHubRobot(ctx context.Context, gh doctorGitHub) {
	what, env := "robot token", "CHANGEBOT_GITHUB_TOKEN"
	if d.cfg.GitHubToken == "" {
		what, env = "robot (GitHub App installation)", "CHANGEBOT_GITHUB_APP_ID, CHANGEBOT_GITHUB_APP_PRIVATE_KEY and CHANGEBOT_GITHUB_INSTALLATION_ID"
	}
	u, err := gh.CurrentUser(ctx)
	if err != nil {
		d.gitHubFinding(what, env, err)
		return
	}
	d.robot = u
	d.ok(fmt.Sprintf("%s: user %s (id %d)", what, u.Username, u.ID))
}

func (d *doctor) checkGitHubReviewers(ctx context.Context, gh doctorGitHub) {
	const env = "CHANGEBOT_REVIEWER_TOKENS"
	n := gh.ReviewerCount()
	d.reviewers = make([]platform.User, n)
	if n == 0 {
		d.warn("reviewer tokens: none configured, so no account approves the pull requests",
			"set "+env+" when the branch protection requires approving reviews")
		return
	}
	for i := range n {
		what := fmt.Sprintf("reviewer token %d", i+1)
		u, err := gh.Reviewer(ctx, i)
		if err != nil {
			d.gitHubFinding(what, env, err)
			continue
		}
		what = fmt.Sprintf("%s (user %s)", what, u.Username)
		if d.robot.ID != 0 && u.ID == d.robot.ID {
			d.fail(what+": it is the robot's own account, and GitHub refuses an approval from a pull request's author",
				"give each reviewer its own account and token")
			continue
		}
		if j := indexOfUser(d.reviewers, u); j >= 0 {
			d.fail(fmt.Sprintf("%s: same user as reviewer token %d, and GitHub counts one approval per user", what, j+1),
				"give each reviewer its own account and token")
			continue
		}
		d.reviewers[i] = u
		d.ok(what + ": answers")
	}
}

func indexOfUser(us []platform.User, u platform.User) int {
	for i, x := range us {
		if x.ID != 0 && x.ID == u.ID {
			return i
		}
	}
	return -1
}

func (d *doctor) checkGitHubRepository(ctx context.Context, gh, hooks doctorGitHub, ref string) {
	p, err := gh.Project(ctx, ref)
	if err != nil {
		if errors.Is(err, platform.ErrNotFound) {
			d.fail(fmt.Sprintf("repository %s: not found, or not visible to the robot", ref),
				"check owner/name, and install the App on it (or give the robot access)")
		} else {
			d.fail(fmt.Sprintf("repository %s: unreadable (%v)", ref, err), "check that GitHub is reachable and the robot's credentials valid")
		}
		return
	}
	name := p.PathWithNamespace
	settingsPage := "Settings → Collaborators and teams of " + name
	// An App's bot user is no collaborator: its rights are the App's
	// permissions on the installation (README "GitHub setup").
	if d.robot.ID != 0 && d.cfg.GitHubToken != "" {
		switch access, err := gh.MemberAccess(ctx, p.ID, d.robot.ID); {
		case err != nil:
			d.fail(fmt.Sprintf("robot permission on %s: unreadable (%v)", name, err), "check that GitHub is reachable")
		case access < platform.AccessDeveloper:
			d.fail(fmt.Sprintf("robot %s may not push and merge in %s: its permission is %s, it needs write", d.robot.Username, name, permissionName(access)),
				fmt.Sprintf("give %s write permission in %s", d.robot.Username, settingsPage))
		default:
			d.ok(fmt.Sprintf("robot %s may push and merge in %s (%s)", d.robot.Username, name, permissionName(access)))
		}
	}
	var ok []string
	for _, r := range d.reviewers {
		if r.ID == 0 {
			continue
		}
		switch access, err := gh.MemberAccess(ctx, p.ID, r.ID); {
		case err != nil:
			d.fail(fmt.Sprintf("reviewer %s on %s: permission unreadable (%v)", r.Username, name, err), "check that GitHub is reachable")
		case access < platform.AccessDeveloper:
			d.fail(fmt.Sprintf("reviewer %s may not approve in %s: its permission is %s, and only reviews from accounts with write count", r.Username, name, permissionName(access)),
				fmt.Sprintf("give %s write permission in %s", r.Username, settingsPage))
		default:
			ok = append(ok, r.Username)
		}
	}
	if len(ok) > 0 {
		d.ok(fmt.Sprintf("reviewers %s may approve in %s", strings.Join(ok, ", "), name))
	}
	d.checkGitHubWebhook(ctx, hooks, name)
}

// checkGitHubWebhook looks for the repository webhook sending to the bot.
func (d *doctor) checkGitHubWebhook(ctx context.Context, hooks doctorGitHub, name string) {
	want := d.cfg.ExternalURL + config.GitHubWebhookPath
	events := strings.Join(webhooks.GitHubEvents, ", ")
	fix := "run changebot setup -project " + name
	if d.hookRefused {
		return
	}
	hs, err := hooks.Webhooks(ctx, platform.HookOwner{ID: name})
	switch {
	case errors.Is(err, platform.ErrForbidden) || errors.Is(err, platform.ErrNotFound):
		d.warn(fmt.Sprintf("webhook of %s: %s may not read webhooks (an administrator, or an App with the Webhooks permission), so it is not checked", name, d.hookReaderName()),
			fmt.Sprintf("run changebot doctor -hook-token-file <file with an administrator's token>, or check Settings → Webhooks of %s: %s, application/json, events %s (or the App's webhook)", name, want, events))
		return
	case err != nil:
		d.fail(fmt.Sprintf("webhook of %s: unreadable (%v)", name, err), "check that GitHub is reachable")
		return
	}
	for _, h := range hs {
		if h.URL != want {
			continue
		}
		if h.AlertStatus != platform.WebhookExecutable {
			d.fail(fmt.Sprintf("webhook %d of %s sends to %s but is not active", h.ID, name, want), fix+", or make it active in Settings → Webhooks")
			return
		}
		if m := missingEvents(h); len(m) > 0 {
			d.fail(fmt.Sprintf("webhook %d of %s does not send %s", h.ID, name, strings.Join(m, ", ")), fix)
			return
		}
		d.ok(fmt.Sprintf("webhook %d of %s sends %s to %s (GitHub does not show its secret)", h.ID, name, events, want))
		return
	}
	d.fail(fmt.Sprintf("webhook of %s: none sends to %s", name, want), fix+" (or configure the App's webhook to that URL)")
}

// permissionName names a GitHub repository permission from the access
// level platform/github maps it onto (AccessLevelOf).
func permissionName(level int) string {
	switch {
	case level >= platform.AccessOwner:
		return "admin"
	case level >= platform.AccessMaintainer:
		return "maintain"
	case level >= platform.AccessDeveloper:
		return "write"
	case level >= platform.AccessReporter:
		return "read"
	}
	return "none"
}
