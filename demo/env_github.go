package demo

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"changebot/config"
	"changebot/platform/approval/approvalfake"
	"changebot/platform/github/githubfake"
	"changebot/templates"
	"changebot/webhooks"
)

// NewGitHubEnvAt is NewEnvAt on GitHub (`changebot demo -platform
// github`, issue 15 point 7): githubfake in place of gitlabfake, sending
// signed webhooks to /webhooks/github, with the same accounts (the robot,
// two reviewer accounts with write permission, the demo's people) and a
// default branch protected like the README's GitHub setup asks: the CI's
// check required and one approving review.
func NewGitHubEnvAt(addrs Addrs, databaseURL string, autoApprove bool, pipelineDuration time.Duration, logger *slog.Logger) (*Env, error) {
	ln, ghLn, apLn, err := listenDemo(addrs, "GitHub")
	if err != nil {
		return nil, err
	}
	base := "http://" + ln.Addr().String()
	gh := githubfake.New(githubfake.Options{WebhookURL: base + config.GitHubWebhookPath, WebhookSecret: WebhookSecret,
		Logger: logger, Listener: ghLn, CIDuration: pipelineDuration})
	gh.AddUser(Robot, RobotToken)
	collaborators := map[string]string{Robot: "maintain", Requester: "write", Approver: "write",
		Operator: "write", Developer: "write", Reporter: "read"}
	var reviewerTokens []string
	for _, r := range Reviewers {
		gh.AddUser(r.Name, r.Token)
		collaborators[r.Name] = "write"
		reviewerTokens = append(reviewerTokens, r.Token)
	}
	for _, u := range []string{Requester, Operator, Developer, Reporter, Approver} {
		gh.AddUser(u, "demo-"+u+"-token")
	}
	repo := gh.AddRepo(githubfake.RepoSpec{FullName: Project, Collaborators: collaborators,
		RequiredContexts: []string{"build"}, RequiredApprovals: 1})
	// The webhook `changebot setup` would create: the fake sends events to
	// Options.WebhookURL anyway; this makes doctor see it.
	gh.AddRepoHook(repo.ID, githubfake.Hook{URL: reachable(base) + config.GitHubWebhookPath, ContentType: "json",
		Secret: WebhookSecret, Events: webhooks.GitHubEvents, Active: true})
	decision := ""
	if autoApprove {
		decision = "approved"
	}
	ap := approvalfake.New(approvalfake.Options{Secret: CallbackSecret, AutoDecision: decision, AutoDelay: 300 * time.Millisecond,
		Approver: "carol", Listener: apLn, TicketPages: true})
	cfg := config.Default()
	cfg.Platform = config.PlatformGitHub
	cfg.DatabaseURL = databaseURL
	cfg.GitHubURL = gh.URL()
	cfg.GitHubToken = RobotToken
	cfg.ReviewerTokens = reviewerTokens
	cfg.WebhookSecrets = []string{WebhookSecret}
	cfg.CallbackSecret = CallbackSecret
	cfg.APITokens = APITokens()
	cfg.ApprovalURL = ap.URL()
	cfg.ExternalURL = reachable(base)
	cfg.Workers = 10
	cfg.Operators = []string{Operator}
	cfg.ShutdownGrace = 5 * time.Second
	cfg.ShutdownDelay = 0
	return &Env{GitHub: gh, Repo: repo, Approvals: ap, Config: cfg, Listener: ln, BaseURL: base}, nil
}

// gitHubStatusComment returns the body of the bot's status comment on pull
// request #number.
func (d *Env) gitHubStatusComment(number int64) string {
	for _, c := range d.GitHub.Comments(d.Repo.ID, number) {
		if _, ok := templates.ParseMarker(c.Body); ok {
			return c.Body
		}
	}
	return ""
}

// PlatformURL is the in-memory platform's base URL.
func (d *Env) PlatformURL() string {
	if d.GitHub != nil {
		return d.GitHub.URL()
	}
	return d.GitLab.URL()
}

// printGitHubKeepInstructions is printKeepInstructions for a demo on
// githubfake: its REST API takes the demo accounts' tokens, and a comment
// posted there reaches the bot as a signed issue_comment webhook.
func printGitHubKeepInstructions(out io.Writer, i Info, atExit string) {
	fmt.Fprintf(out, `
The demo keeps running until Ctrl-C (%[9]s).

  bot              %[1]s   REST API tokens: submitter %[4]s, operator %[5]s, viewer %[13]s (read-only)
  web pages        %[1]s/ui   log in with the viewer token %[13]s (or any token above)
                   webhook secret %[10]s (signs X-Hub-Signature-256 of POST %[1]s/webhooks/github)
                   approval callback secret %[11]s
  GitHub (memory)  %[2]s   robot token %[6]s; reviewer tokens %[14]s; repository %[7]s (id %[8]d)
  approval system  %[3]s   approves every request after 300 ms
  GitHub users     alice, olivia (operator), dave, carol (write), rita (read); tokens demo-<login>-token

Submit another change:
  curl -sS -X POST %[1]s/api/v1/changes -H 'Authorization: Bearer %[4]s' -H 'Content-Type: application/json' \
    -d '{"subject_id": "payments-api", "target_key": "prod/us-east-1", "project": "%[7]s", "title": "Raise payments-api replicas in us-east-1", "requested_by": "alice", "files": [{"path": "services/payments-api/us-east-1.yaml", "content": "replicas: 4\n"}]}'
Comment on pull request #%[12]d as dave (commands: /help, /status, /retry, /cancel):
  curl -sS -X POST %[2]s/repos/%[7]s/issues/%[12]d/comments -H 'Authorization: Bearer demo-dave-token' -d '{"body": "/help"}'
Watch the status comment and the replies:
  curl -sS %[2]s/repos/%[7]s/issues/%[12]d/comments -H 'Authorization: Bearer demo-alice-token'
`, i.BotURL, i.GitLabURL, i.ApprovalURL, APIToken, OperatorToken, RobotToken, i.Project, i.ProjectID,
		atExit, WebhookSecret, CallbackSecret, max(i.MRIID, 1), ViewerToken, reviewerTokens())
	if len(i.Export) > 0 {
		printExports(out, i)
	}
}
