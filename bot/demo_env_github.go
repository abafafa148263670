package bot

import (
	"log/slog"
	"time"

	"changebot/platform/approval/approvalfake"
	"changebot/platform/github/githubfake"
	"changebot/templates"
)

// newGitHubDemoEnvAt is newDemoEnvAt on GitHub (`changebot demo -platform
// github`, issue 15 point 7): githubfake in place of gitlabfake, sending
// signed webhooks to /webhooks/github, with the same accounts (the robot,
// two reviewer accounts with write permission, the demo's people) and a
// default branch protected like the README's GitHub setup asks: the CI's
// check required and one approving review.
func newGitHubDemoEnvAt(addrs demoAddrs, databaseURL string, autoApprove bool, pipelineDuration time.Duration, logger *slog.Logger) (*demoEnv, error) {
	ln, err := listen(addrs.Bot, "bot")
	if err != nil {
		return nil, err
	}
	ghLn, err := listen(addrs.GitLab, "in-memory GitHub")
	if err != nil {
		ln.Close()
		return nil, err
	}
	apLn, err := listen(addrs.Approval, "approval system")
	if err != nil {
		ln.Close()
		ghLn.Close()
		return nil, err
	}
	base := "http://" + ln.Addr().String()
	gh := githubfake.New(githubfake.Options{WebhookURL: base + webhookPathOf(PlatformGitHub), WebhookSecret: demoWebhookSecret,
		Logger: logger, Listener: ghLn, CIDuration: pipelineDuration})
	gh.AddUser(demoRobot, demoRobotToken)
	collaborators := map[string]string{demoRobot: "maintain", demoRequester: "write", demoApprover: "write",
		demoOperator: "write", demoDeveloper: "write", demoReporter: "read"}
	var reviewerTokens []string
	for _, r := range demoReviewers {
		gh.AddUser(r.name, r.token)
		collaborators[r.name] = "write"
		reviewerTokens = append(reviewerTokens, r.token)
	}
	for _, u := range []string{demoRequester, demoOperator, demoDeveloper, demoReporter, demoApprover} {
		gh.AddUser(u, "demo-"+u+"-token")
	}
	repo := gh.AddRepo(githubfake.RepoSpec{FullName: demoProject, Collaborators: collaborators,
		RequiredContexts: []string{"build"}, RequiredApprovals: 1})
	decision := ""
	if autoApprove {
		decision = "approved"
	}
	ap := approvalfake.New(approvalfake.Options{Secret: demoCallbackSecret, AutoDecision: decision, AutoDelay: 300 * time.Millisecond,
		Approver: "carol", Listener: apLn, TicketPages: true})
	cfg := DefaultConfig()
	cfg.Platform = PlatformGitHub
	cfg.DatabaseURL = databaseURL
	cfg.GitHubURL = gh.URL()
	cfg.GitHubToken = demoRobotToken
	cfg.ReviewerTokens = reviewerTokens
	cfg.WebhookSecrets = []string{demoWebhookSecret}
	cfg.CallbackSecret = demoCallbackSecret
	cfg.APITokens = []APIToken{{Role: RoleSubmitter, Token: demoAPIToken}, {Role: RoleOperator, Token: demoOperatorToken}}
	cfg.ApprovalURL = ap.URL()
	cfg.ExternalURL = reachable(base)
	cfg.Workers = 10
	cfg.Operators = []string{demoOperator}
	cfg.ShutdownGrace = 5 * time.Second
	cfg.ShutdownDelay = 0
	return &demoEnv{GitHub: gh, Repo: repo, Approvals: ap, Config: cfg, Listener: ln, BaseURL: base}, nil
}

// gitHubStatusComment returns the body of the bot's status comment on pull
// request #number.
func (d *demoEnv) gitHubStatusComment(number int64) string {
	for _, c := range d.GitHub.Comments(d.Repo.ID, number) {
		if _, ok := templates.ParseMarker(c.Body); ok {
			return c.Body
		}
	}
	return ""
}
