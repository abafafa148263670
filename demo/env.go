package demo

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"changebot/api"
	"changebot/config"
	"changebot/flows"
	"changebot/ops"
	"changebot/platform/approval/approvalfake"
	"changebot/platform/github/githubfake"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/templates"
)

// Demo identities and secrets: the demo and the end-to-end tests use the
// in-memory GitLab, so these values never leave the process.
const (
	Robot          = "changebot"
	RobotToken     = "demo-robot-token"
	WebhookSecret  = "demo-webhook-secret"
	CallbackSecret = "demo-callback-secret"
	APIToken       = "demo-api-token"
	OperatorToken  = "demo-operator-token"
	ViewerToken    = "demo-viewer-token" // read-only: the web pages (/ui) and GET of the REST API
	Project        = "platform/config"
	Requester      = "alice"
	Operator       = "olivia" // configured operator, Developer access
	Developer      = "dave"   // Developer access, no role
	Reporter       = "rita"   // Reporter access only
	Approver       = "carol"  // approver in the in-GitLab approval mode, Developer access
)

// Reviewers are the demo's reviewer robots on the in-memory platform: each
// approves separately.
var Reviewers = []struct{ Name, Token string }{{"reviewer-1", "demo-reviewer-1"}, {"reviewer-2", "demo-reviewer-2"}}

// Poll is a fast polling schedule for the demo and tests.
var Poll = flows.PollConfig{ShortInterval: 500 * time.Millisecond, ShortCount: 20, LongInterval: 2 * time.Second,
	PipelineDeadline: 2 * time.Minute, RebaseDeadline: time.Minute, DeployDeadline: 2 * time.Minute,
	NoteDelay: 200 * time.Millisecond, MaxRounds: 3}

// Env is the bot with the in-memory GitLab and the stand-in approval
// system around it: what `changebot demo` runs and the end-to-end tests use.
type Env struct {
	// GitLab and Project are set on GitLab, GitHub and Repo on GitHub
	// (NewGitHubEnvAt).
	GitLab    *gitlabfake.Server
	GitHub    *githubfake.Server
	Repo      githubfake.Repo
	Approvals *approvalfake.Server
	Project   gitlabfake.Project
	Config    config.Config
	Listener  net.Listener
	BaseURL   string
	// Switches, on GitLab in the demo's own environment (not NewEnv's),
	// make the in-memory GitLab and the approval system go wrong on
	// request; they are served under SwitchesPath on the GitLab's
	// address. Nil elsewhere.
	Switches *Switches
	// closers stop what the environment started besides the fakes, last
	// first.
	closers []func()
}

// NewEnv starts gitlabfake (sending webhooks to a listener the bot will
// serve) and the stand-in approval system, and returns the bot's Config.
func NewEnv(databaseURL string, autoApprove bool, pipelineDuration time.Duration, logger *slog.Logger) (*Env, error) {
	return NewEnvAt(Addrs{}, databaseURL, autoApprove, pipelineDuration, logger)
}

// Addrs are where the demo's three servers listen (host:port); empty
// means a free port on 127.0.0.1.
type Addrs struct {
	Bot, GitLab, Approval string
}

// Listen listens on addr, or a free port on 127.0.0.1; what names the
// server in its error.
func Listen(addr, what string) (net.Listener, error) {
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
func listenDemo(addrs Addrs, platform string) (bot, fake, approval net.Listener, err error) {
	if bot, err = Listen(addrs.Bot, "bot"); err != nil {
		return nil, nil, nil, err
	}
	if fake, err = Listen(addrs.GitLab, "in-memory "+platform); err != nil {
		bot.Close()
		return nil, nil, nil, err
	}
	if approval, err = Listen(addrs.Approval, "approval system"); err != nil {
		bot.Close()
		fake.Close()
		return nil, nil, nil, err
	}
	return bot, fake, approval, nil
}

// NewEnvAt is NewEnv with the servers on addrs.
func NewEnvAt(addrs Addrs, databaseURL string, autoApprove bool, pipelineDuration time.Duration, logger *slog.Logger) (*Env, error) {
	return newEnvAt(addrs, databaseURL, autoApprove, false, pipelineDuration, logger)
}

// newEnvAt is NewEnvAt; with switches (`changebot demo`) the approval
// system decides nothing itself: the switches' approval desk approves
// each request after approveDelay, unless told to hold it (autoApprove is
// then moot), and the in-memory GitLab's address also serves the
// switches (SwitchesPath).
func newEnvAt(addrs Addrs, databaseURL string, autoApprove, switches bool, pipelineDuration time.Duration, logger *slog.Logger) (*Env, error) {
	ln, glLn, apLn, err := listenDemo(addrs, "GitLab")
	if err != nil {
		return nil, err
	}
	base := "http://" + ln.Addr().String()
	served := glLn
	if switches {
		served = newAddrListener(glLn.Addr()) // the demo serves glLn below
	}
	gl := gitlabfake.New(gitlabfake.Options{WebhookURL: base + "/webhooks/gitlab", WebhookSecret: WebhookSecret, Logger: logger, Listener: served})
	gl.AddUser(Robot, RobotToken, gitlabfake.AsBot())
	members := map[string]int{Robot: gitlabfake.AccessMaintainer, Requester: gitlabfake.AccessDeveloper}
	var reviewerTokens []string
	for _, r := range Reviewers {
		gl.AddUser(r.Name, r.Token, gitlabfake.AsBot())
		members[r.Name] = gitlabfake.AccessDeveloper
		reviewerTokens = append(reviewerTokens, r.Token)
	}
	gl.AddUser(Requester, "demo-alice-token")
	gl.AddUser(Operator, "demo-olivia-token")
	gl.AddUser(Developer, "demo-dave-token")
	gl.AddUser(Reporter, "demo-rita-token")
	gl.AddUser(Approver, "demo-carol-token")
	members[Approver] = gitlabfake.AccessDeveloper
	members[Operator] = gitlabfake.AccessDeveloper
	members[Developer] = gitlabfake.AccessDeveloper
	members[Reporter] = gitlabfake.AccessReporter
	proj := gl.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: Project, Members: members})
	gl.SetPipelineScript(proj.ID, gitlabfake.PipelineScript{Duration: pipelineDuration})
	// The webhook `changebot setup` would create: the fake sends events to
	// Options.WebhookURL anyway; this makes doctor see it.
	gl.AddProjectHook(proj.ID, gitlabfake.HookSpec{URL: reachable(base) + config.GitLabWebhookPath, Token: WebhookSecret, Name: ops.WebhookName,
		Triggers: []string{gitlabfake.TriggerMergeRequests, gitlabfake.TriggerPipeline, gitlabfake.TriggerNote}})
	decision := ""
	if autoApprove && !switches {
		decision = "approved"
	}
	ap := approvalfake.New(approvalfake.Options{Secret: CallbackSecret, AutoDecision: decision, AutoDelay: approveDelay, Approver: "carol", Listener: apLn,
		TicketPages: true})
	env := &Env{GitLab: gl, Approvals: ap, Project: proj, Listener: ln, BaseURL: base}
	if switches {
		env.Switches = newSwitches(gl, ap, proj.ID, pipelineDuration)
		srv := &http.Server{Handler: withSwitches(env.Switches, gl.Handler()), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(glLn) }()
		env.closers = append(env.closers, func() { _ = srv.Close() }, env.Switches.Close)
	}
	cfg := config.Default()
	cfg.DatabaseURL = databaseURL
	cfg.GitLabURL = gl.URL()
	cfg.GitLabToken = RobotToken
	cfg.ReviewerTokens = reviewerTokens
	cfg.WebhookSecrets = []string{WebhookSecret}
	cfg.CallbackSecret = CallbackSecret
	cfg.APITokens = APITokens()
	cfg.ApprovalURL = ap.URL()
	cfg.ExternalURL = reachable(base)
	cfg.Workers = 10
	cfg.Operators = []string{Operator}
	cfg.ShutdownGrace = 5 * time.Second
	cfg.ShutdownDelay = 0 // nothing routes to the demo through a load balancer
	env.Config = cfg
	return env, nil
}

// APITokens are the demo's REST API and web page tokens, one per role.
func APITokens() []api.Token {
	return []api.Token{{Role: api.RoleSubmitter, Token: APIToken}, {Role: api.RoleOperator, Token: OperatorToken},
		{Role: api.RoleViewer, Token: ViewerToken}}
}

// reviewerTokens lists the reviewer accounts' tokens for the kept
// demo's instructions.
func reviewerTokens() string {
	var out []string
	for _, r := range Reviewers {
		out = append(out, r.Token+" ("+r.Name+")")
	}
	return strings.Join(out, ", ")
}

// Close stops the fakes and the switches.
func (d *Env) Close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.Approvals.Close()
	if d.GitLab != nil {
		d.GitLab.Close()
	}
	if d.GitHub != nil {
		d.GitHub.Close()
	}
}

// StatusComment returns the body of the bot's status note on the MR.
func (d *Env) StatusComment(iid int64) string {
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
