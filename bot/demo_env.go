package bot

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"changebot/api"
	"changebot/config"
	"changebot/flows"
	"changebot/platform/approval/approvalfake"
	"changebot/platform/github/githubfake"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store/postgres"
	"changebot/templates"
)

// Demo identities and secrets: the demo and the end-to-end tests use the
// in-memory GitLab, so these values never leave the process.
const (
	demoRobot          = "changebot"
	demoRobotToken     = "demo-robot-token"
	demoWebhookSecret  = "demo-webhook-secret"
	demoCallbackSecret = "demo-callback-secret"
	demoAPIToken       = "demo-api-token"
	demoOperatorToken  = "demo-operator-token"
	demoViewerToken    = "demo-viewer-token" // read-only: the web pages (/ui) and GET of the REST API
	demoProject        = "platform/config"
	demoRequester      = "alice"
	demoOperator       = "olivia" // configured operator, Developer access
	demoDeveloper      = "dave"   // Developer access, no role
	demoReporter       = "rita"   // Reporter access only
	demoApprover       = "carol"  // approver in the in-GitLab approval mode, Developer access
)

var demoReviewers = []struct{ name, token string }{{"reviewer-1", "demo-reviewer-1"}, {"reviewer-2", "demo-reviewer-2"}}

// demoPoll is a fast polling schedule for the demo and tests.
var demoPoll = flows.PollConfig{ShortInterval: 500 * time.Millisecond, ShortCount: 20, LongInterval: 2 * time.Second,
	PipelineDeadline: 2 * time.Minute, RebaseDeadline: time.Minute, DeployDeadline: 2 * time.Minute,
	NoteDelay: 200 * time.Millisecond, MaxRounds: 3}

// demoEnv is the bot with the in-memory GitLab and the stand-in approval
// system around it: what `changebot demo` runs and the end-to-end tests use.
type demoEnv struct {
	// GitLab and Project are set on GitLab, GitHub and Repo on GitHub
	// (newGitHubDemoEnvAt).
	GitLab    *gitlabfake.Server
	GitHub    *githubfake.Server
	Repo      githubfake.Repo
	Approvals *approvalfake.Server
	Project   gitlabfake.Project
	Config    config.Config
	Listener  net.Listener
	BaseURL   string
}

// newDemoEnv starts gitlabfake (sending webhooks to a listener the bot will
// serve) and the stand-in approval system, and returns the bot's config.Config.
func newDemoEnv(databaseURL string, autoApprove bool, pipelineDuration time.Duration, logger *slog.Logger) (*demoEnv, error) {
	return newDemoEnvAt(demoAddrs{}, databaseURL, autoApprove, pipelineDuration, logger)
}

// demoAddrs are where the demo's three servers listen (host:port); empty
// means a free port on 127.0.0.1.
type demoAddrs struct {
	Bot, GitLab, Approval string
}

// listen listens on addr, or a free port on 127.0.0.1.
func listen(addr, what string) (net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for the %s on %s: %w", what, addr, err)
	}
	return ln, nil
}

// listenDemo opens the demo's three listeners on addrs: the bot's, the
// in-memory platform's (named platform in errors) and the approval
// system's. On an error none is left open.
func listenDemo(addrs demoAddrs, platform string) (bot, fake, approval net.Listener, err error) {
	if bot, err = listen(addrs.Bot, "bot"); err != nil {
		return nil, nil, nil, err
	}
	if fake, err = listen(addrs.GitLab, "in-memory "+platform); err != nil {
		bot.Close()
		return nil, nil, nil, err
	}
	if approval, err = listen(addrs.Approval, "approval system"); err != nil {
		bot.Close()
		fake.Close()
		return nil, nil, nil, err
	}
	return bot, fake, approval, nil
}

// newDemoEnvAt is newDemoEnv with the servers on addrs.
func newDemoEnvAt(addrs demoAddrs, databaseURL string, autoApprove bool, pipelineDuration time.Duration, logger *slog.Logger) (*demoEnv, error) {
	ln, glLn, apLn, err := listenDemo(addrs, "GitLab")
	if err != nil {
		return nil, err
	}
	base := "http://" + ln.Addr().String()
	gl := gitlabfake.New(gitlabfake.Options{WebhookURL: base + "/webhooks/gitlab", WebhookSecret: demoWebhookSecret, Logger: logger, Listener: glLn})
	gl.AddUser(demoRobot, demoRobotToken, gitlabfake.AsBot())
	members := map[string]int{demoRobot: gitlabfake.AccessMaintainer, demoRequester: gitlabfake.AccessDeveloper}
	var reviewerTokens []string
	for _, r := range demoReviewers {
		gl.AddUser(r.name, r.token, gitlabfake.AsBot())
		members[r.name] = gitlabfake.AccessDeveloper
		reviewerTokens = append(reviewerTokens, r.token)
	}
	gl.AddUser(demoRequester, "demo-alice-token")
	gl.AddUser(demoOperator, "demo-olivia-token")
	gl.AddUser(demoDeveloper, "demo-dave-token")
	gl.AddUser(demoReporter, "demo-rita-token")
	gl.AddUser(demoApprover, "demo-carol-token")
	members[demoApprover] = gitlabfake.AccessDeveloper
	members[demoOperator] = gitlabfake.AccessDeveloper
	members[demoDeveloper] = gitlabfake.AccessDeveloper
	members[demoReporter] = gitlabfake.AccessReporter
	proj := gl.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: demoProject, Members: members})
	gl.SetPipelineScript(proj.ID, gitlabfake.PipelineScript{Duration: pipelineDuration})
	// The webhook `changebot setup` would create: the fake sends events to
	// Options.WebhookURL anyway; this makes doctor see it.
	gl.AddProjectHook(proj.ID, gitlabfake.HookSpec{URL: reachable(base) + config.GitLabWebhookPath, Token: demoWebhookSecret, Name: webhookName,
		Triggers: []string{gitlabfake.TriggerMergeRequests, gitlabfake.TriggerPipeline, gitlabfake.TriggerNote}})
	decision := ""
	if autoApprove {
		decision = "approved"
	}
	ap := approvalfake.New(approvalfake.Options{Secret: demoCallbackSecret, AutoDecision: decision, AutoDelay: 300 * time.Millisecond, Approver: "carol", Listener: apLn,
		TicketPages: true})
	cfg := config.Default()
	cfg.DatabaseURL = databaseURL
	cfg.GitLabURL = gl.URL()
	cfg.GitLabToken = demoRobotToken
	cfg.ReviewerTokens = reviewerTokens
	cfg.WebhookSecrets = []string{demoWebhookSecret}
	cfg.CallbackSecret = demoCallbackSecret
	cfg.APITokens = demoAPITokens()
	cfg.ApprovalURL = ap.URL()
	cfg.ExternalURL = reachable(base)
	cfg.Workers = 10
	cfg.Operators = []string{demoOperator}
	cfg.ShutdownGrace = 5 * time.Second
	cfg.ShutdownDelay = 0 // nothing routes to the demo through a load balancer
	return &demoEnv{GitLab: gl, Approvals: ap, Project: proj, Config: cfg, Listener: ln, BaseURL: base}, nil
}

// demoAPITokens are the demo's REST API and web page tokens, one per role.
func demoAPITokens() []api.Token {
	return []api.Token{{Role: api.RoleSubmitter, Token: demoAPIToken}, {Role: api.RoleOperator, Token: demoOperatorToken},
		{Role: api.RoleViewer, Token: demoViewerToken}}
}

// demoReviewerTokens lists the reviewer accounts' tokens for the kept
// demo's instructions.
func demoReviewerTokens() string {
	var out []string
	for _, r := range demoReviewers {
		out = append(out, r.token+" ("+r.name+")")
	}
	return strings.Join(out, ", ")
}

// Close stops the fakes.
func (d *demoEnv) Close() {
	d.Approvals.Close()
	if d.GitLab != nil {
		d.GitLab.Close()
	}
	if d.GitHub != nil {
		d.GitHub.Close()
	}
}

// StatusComment returns the body of the bot's status note on the MR.
func (d *demoEnv) StatusComment(iid int64) string {
	if d.GitHub != nil {
		return d.gitHubStatusComment(iid)
	}
	snap, ok := d.GitLab.MergeRequest(d.Project.ID, iid)
	if !ok {
		return ""
	}
	for _, n := range snap.Notes {
		if _, ok := templates.ParseMarker(n.Body); ok {
			return n.Body
		}
	}
	return ""
}

// dropSchema drops schema with everything in it.
func dropSchema(ctx context.Context, databaseURL, schema string) error {
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("connecting to the database: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		return fmt.Errorf("dropping schema %s: %w", schema, err)
	}
	return nil
}

// resetSchema drops and recreates schema and migrates it.
func resetSchema(ctx context.Context, databaseURL, schema string) error {
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("connecting to the database: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		return fmt.Errorf("dropping schema %s: %w", schema, err)
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return fmt.Errorf("creating schema %s: %w", schema, err)
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	sp, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer sp.Close()
	return postgres.Migrate(ctx, sp, &postgres.MigrateOpts{Schema: schema})
}
