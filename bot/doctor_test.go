package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"changebot/config"
	"changebot/demo"
	"changebot/ops"
	"changebot/platform"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store/postgres/pgtest"
)

const (
	appProject    = "platform/app"
	maintainer    = "mia"
	maintainerTok = "demo-mia-token"
)

// newDayOneEnv is the demo environment with a second project,
// platform/app, as an operator finds it on day one: no webhook, the robot
// a Developer where merging into main needs Maintainer (GitLab's
// default), and reviewer 2's token revoked. mia is its Maintainer.
func newDayOneEnv(t *testing.T) (*demo.Env, string) {
	t.Helper()
	env := newTestEnv(t, true, 200*time.Millisecond)
	env.GitLab.AddUser(maintainer, maintainerTok)
	_ = env.GitLab.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: appProject, MergeAccessLevel: gitlabfake.AccessMaintainer,
		Members: map[string]int{demo.Robot: gitlabfake.AccessDeveloper, maintainer: gitlabfake.AccessMaintainer,
			demo.Reviewers[0].Name: gitlabfake.AccessDeveloper, demo.Reviewers[1].Name: gitlabfake.AccessDeveloper}})
	env.GitLab.RevokeToken(demo.Reviewers[1].Token)
	_, sc := startBot(t, env)
	return env, sc.Name
}

func levels(checks []ops.Check, level string) []ops.Check {
	var out []ops.Check
	for _, c := range checks {
		if c.Level == level {
			out = append(out, c)
		}
	}
	return out
}

// TestDoctorFindsDayOneProblems is issue 14's acceptance: a revoked
// reviewer token, a missing webhook and a robot without merge rights are
// three FAILs with fixes, through the CLI with exit code 1; after setup the
// webhook check is OK.
func TestDoctorFindsDayOneProblems(t *testing.T) {
	t.Parallel()
	env, schema := newDayOneEnv(t)
	ctx := context.Background()
	opts := &ops.DoctorOpts{Projects: []string{appProject}, HookToken: maintainerTok, Schema: schema}
	checks := ops.RunDoctor(ctx, env.Config, opts)
	t.Logf("doctor:\n%s", lines(checks))
	fails := levels(checks, ops.CheckFail)
	want := []string{
		"reviewer token 2: GitLab refused it (401)",
		"robot changebot may not push and merge into main of platform/app: its role is Developer, merging needs Maintainer",
		"webhook of platform/app: none sends to " + env.BaseURL + "/webhooks/gitlab",
	}
	if len(fails) != len(want) {
		t.Fatalf("%d FAILs, want %d:\n%s", len(fails), len(want), lines(checks))
	}
	for i, w := range want {
		if !strings.HasPrefix(fails[i].What, w) || fails[i].Fix == "" {
			t.Errorf("FAIL %d = %q (fix %q), want it to start %q with a fix", i+1, fails[i].What, fails[i].Fix, w)
		}
	}
	for _, w := range []string{"give changebot the Maintainer role in platform/app", "changebot setup -project platform/app", "CHANGEBOT_REVIEWER_TOKENS"} {
		if !strings.Contains(lines(fails), w) {
			t.Errorf("no fix says %q:\n%s", w, lines(fails))
		}
	}
	if warns := levels(checks, ops.CheckWarn); len(warns) != 0 {
		t.Errorf("unexpected WARNs:\n%s", lines(warns))
	}

	// The same through the command line: one line per check, exit 1.
	cfgFile := writeConfig(t, env, schema)
	var out, errOut bytes.Buffer
	code := cliMain([]string{"doctor", "-config", cfgFile, "-project", appProject, "-hook-token-file", tokenFile(t, maintainerTok)}, &out, &errOut)
	if code != 1 || strings.Count(out.String(), "\nFAIL ") != 3 || !strings.Contains(out.String(), " — ") ||
		!strings.Contains(out.String(), "3 FAIL") || !strings.Contains(errOut.String(), "3 check(s) failed") {
		t.Errorf("changebot doctor exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}

	var setupOut bytes.Buffer
	res, err := ops.RunSetup(ctx, env.Config, ops.SetupOpts{Owners: []platform.HookOwner{{ID: appProject}}, HookToken: maintainerTok, Schema: schema, Out: &setupOut})
	if err != nil || len(res) != 1 || res[0].Action != ops.SetupCreated || !res[0].Delivered {
		t.Fatalf("setup = %+v, %v\n%s", res, err, setupOut.String())
	}
	t.Logf("setup:\n%s", setupOut.String())
	after := ops.RunDoctor(ctx, env.Config, opts)
	if f := levels(after, ops.CheckFail); len(f) != 2 {
		t.Errorf("after setup: %d FAILs, want the 2 that are not the webhook's:\n%s", len(f), lines(after))
	}
	if !strings.Contains(lines(levels(after, ops.CheckOK)), "webhook ") {
		t.Errorf("after setup the webhook check is not OK:\n%s", lines(after))
	}
}

// TestDoctorAllGoodOnTheDemo: the demo's own project passes every check,
// and a disabled webhook or a token about to expire is found.
func TestDoctorAllGoodOnTheDemo(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 200*time.Millisecond)
	_, sc := startBot(t, env)
	opts := &ops.DoctorOpts{Projects: []string{demo.Project}, Schema: sc.Name}
	checks := ops.RunDoctor(context.Background(), env.Config, opts)
	if n := len(levels(checks, ops.CheckOK)); n != len(checks) || n != 8 {
		t.Fatalf("want 8 OK checks (database, robot, 2 reviewers, merge rights, approvers, webhook, approval system):\n%s", lines(checks))
	}
	hook := env.GitLab.ProjectHooks(env.Project.ID)[0]
	env.GitLab.DisableHook(hook.ID, time.Now().Add(time.Hour))
	now := time.Now()
	env.GitLab.SetTokenInfo(demo.RobotToken, gitlabfake.TokenInfo{ExpiresAt: now.Add(5 * 24 * time.Hour)})
	checks = ops.RunDoctor(context.Background(), env.Config, opts)
	if f := lines(levels(checks, ops.CheckFail)); !strings.Contains(f, "is disabled until") || !strings.Contains(f, "Recent events") {
		t.Errorf("a temporarily disabled webhook is not a FAIL naming where to look:\n%s", lines(checks))
	}
	if w := lines(levels(checks, ops.CheckWarn)); !strings.Contains(w, "robot token (user changebot): expires") {
		t.Errorf("a robot token expiring in 5 days is not a WARN:\n%s", lines(checks))
	}
}

// TestSetupIsIdempotent: a second run changes nothing and says so; a hook
// whose secret is not ours is fixed; a test event of a project with a
// merge request is stored by the bot.
func TestSetupIsIdempotent(t *testing.T) {
	t.Parallel()
	env, schema := newDayOneEnv(t)
	ctx := context.Background()
	run := func(owner string) (ops.SetupResult, string) {
		t.Helper()
		var out bytes.Buffer
		res, err := ops.RunSetup(ctx, env.Config, ops.SetupOpts{Owners: []platform.HookOwner{{ID: owner}}, HookToken: maintainerTok, Schema: schema, Out: &out})
		if err != nil || len(res) != 1 {
			t.Fatalf("setup %s: %v\n%s", owner, err, out.String())
		}
		return res[0], out.String()
	}
	first, out1 := run(appProject)
	second, out2 := run(appProject)
	if first.Action != ops.SetupCreated || second.Action != ops.SetupUnchanged || second.HookID != first.HookID {
		t.Errorf("runs: %+v then %+v, want created then unchanged\n%s%s", first, second, out1, out2)
	}
	if !strings.Contains(out2, "no change") || !second.Delivered {
		t.Errorf("second run output:\n%s", out2)
	}
	hooks := env.GitLab.ProjectHooks(env.Project.ID + 1) // platform/app
	if len(hooks) != 1 || hooks[0].Token != demo.WebhookSecret || hooks[0].Tests != 2 {
		t.Errorf("hooks after two runs: %+v, want one, with the secret, tested twice", hooks)
	}

	// The demo project's hook, with a secret the bot does not know; the
	// project has a merge request, so the test is a Merge Request Hook.
	openMR(t, env)
	demoHook := env.GitLab.ProjectHooks(env.Project.ID)[0]
	env.GitLab.SetMember(env.Project.ID, maintainer, gitlabfake.AccessMaintainer)
	env.GitLab.AddProjectHook(env.Project.ID, gitlabfake.HookSpec{}) // another hook, not ours
	setHookToken(t, env, demoHook.ID, "an-old-secret")
	fixed, out3 := run(demo.Project)
	t.Logf("setup of %s:\n%s", demo.Project, out3)
	if fixed.Action != ops.SetupUpdated || !fixed.Delivered || !strings.Contains(out3, "secret token was not one of") ||
		!strings.Contains(out3, "the bot answered 2xx") {
		t.Errorf("setup of a hook with a foreign secret: %+v\n%s", fixed, out3)
	}
}

// glCall makes a REST call to the fake GitLab and fails the test unless
// it answers want.
func glCall(t *testing.T, env *demo.Env, method, path, token string, body any, want int) map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, env.GitLab.URL()+"/api/v4"+path, bytes.NewReader(b))
	req.Header.Set("PRIVATE-TOKEN", token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, want)
	}
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	return m
}

// openMR opens a merge request in the demo project as the robot.
func openMR(t *testing.T, env *demo.Env) {
	t.Helper()
	p := "/projects/" + itoa(env.Project.ID)
	glCall(t, env, "POST", p+"/repository/branches", demo.RobotToken, map[string]any{"branch": "by-hand", "ref": "main"}, 201)
	glCall(t, env, "POST", p+"/repository/commits", demo.RobotToken, map[string]any{"branch": "by-hand", "commit_message": "By hand",
		"actions": []any{map[string]any{"action": "create", "file_path": "by-hand.yaml", "content": "a: 1\n"}}}, 201)
	glCall(t, env, "POST", p+"/merge_requests", demo.RobotToken, map[string]any{"source_branch": "by-hand", "target_branch": "main", "title": "By hand"}, 201)
}

// setHookToken gives a hook another secret, as a Maintainer would in
// GitLab's settings.
func setHookToken(t *testing.T, env *demo.Env, hookID int64, token string) {
	t.Helper()
	glCall(t, env, "PUT", "/projects/"+itoa(env.Project.ID)+"/hooks/"+itoa(hookID), maintainerTok,
		map[string]any{"url": env.BaseURL + config.GitLabWebhookPath, "token": token}, 200)
}

// lines prints checks one per line.
func lines(checks []ops.Check) string {
	var b strings.Builder
	for _, c := range checks {
		b.WriteString(c.String() + "\n")
	}
	return b.String()
}

// writeConfig writes env's configuration as a YAML file whose database URL
// selects schema.
func writeConfig(t *testing.T, env *demo.Env, schema string) string {
	t.Helper()
	c := env.Config
	q := "?"
	if strings.Contains(c.DatabaseURL, "?") {
		q = "&"
	}
	yaml := fmt.Sprintf(`database_url: %q
gitlab_url: %q
gitlab_token: %q
reviewer_tokens: [%q, %q]
webhook_secrets: [%q]
callback_secret: %q
api_tokens: ["submitter:%s"]
approval_url: %q
external_url: %q
`, c.DatabaseURL+q+"search_path="+schema, c.GitLabURL, c.GitLabToken, c.ReviewerTokens[0], c.ReviewerTokens[1],
		c.WebhookSecrets[0], c.CallbackSecret, demo.APIToken, c.ApprovalURL, c.ExternalURL)
	return writeFile(t, "changebot.yaml", yaml)
}

func tokenFile(t *testing.T, token string) string { return writeFile(t, "token", token+"\n") }

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServeLogsDoctorSummary: `changebot serve` runs doctor at start and
// logs each WARN and the summary, and serves anyway.
func TestServeLogsDoctorSummary(t *testing.T) {
	t.Parallel()
	sc := pgtest.New(t)
	env := newTestEnv(t, true, 200*time.Millisecond)
	env.GitLab.SetTokenInfo(demo.RobotToken, gitlabfake.TokenInfo{ExpiresAt: time.Now().Add(3 * 24 * time.Hour)})
	addr := env.Listener.Addr().String() // the subprocess serves there (botProcess.ln)
	c := env.Config
	logs := &syncBuffer{}
	p := &botProcess{t: t, logs: logs, env: []string{writeFile(t, "changebot.yaml", "log_format: text\n"),
		"CHANGEBOT_LISTEN=" + addr, "DATABASE_URL=" + sc.URL, "CHANGEBOT_GITLAB_URL=" + c.GitLabURL,
		"CHANGEBOT_GITLAB_TOKEN=" + c.GitLabToken, "CHANGEBOT_REVIEWER_TOKENS=" + strings.Join(c.ReviewerTokens, ","),
		"CHANGEBOT_WEBHOOK_SECRETS=" + demo.WebhookSecret, "CHANGEBOT_CALLBACK_SECRET=" + demo.CallbackSecret,
		"CHANGEBOT_API_TOKENS=submitter:" + demo.APIToken, "CHANGEBOT_APPROVAL_URL=" + c.ApprovalURL,
		"CHANGEBOT_EXTERNAL_URL=" + env.BaseURL, "CHANGEBOT_LOG_LEVEL=info",
	}, ln: env.Listener}
	p.start()
	defer p.kill()
	waitListening(t, addr)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), "doctor checked the installation") {
		if time.Now().After(deadline) {
			t.Fatalf("no doctor summary in serve's log:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	got := logs.String()
	if !strings.Contains(got, `summary="4 OK, 1 WARN, 0 FAIL"`) || !strings.Contains(got, `check="robot token (user changebot): expires`) {
		t.Errorf("serve's doctor lines:\n%s", got)
	}
	if want := `msg="listening on the inherited socket" addr=` + addr; !strings.Contains(got, want) {
		t.Errorf("serve's log does not say %q (LISTEN_FDS=1, the socket as fd 3):\n%s", want, got)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("serve stopped serving after a WARN: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestSetupGroupWebhook: setup -group creates a group webhook (tested
// through the group's first project) and doctor accepts it for a project
// of the group that has none of its own.
func TestSetupGroupWebhook(t *testing.T) {
	t.Parallel()
	env, schema := newDayOneEnv(t)
	env.GitLab.AddGroup("platform", map[string]int{maintainer: gitlabfake.AccessOwner})
	var out bytes.Buffer
	res, err := ops.RunSetup(context.Background(), env.Config, ops.SetupOpts{Owners: []platform.HookOwner{{Group: true, ID: "platform"}},
		HookToken: maintainerTok, Schema: schema, Out: &out})
	if err != nil || len(res) != 1 || res[0].Action != ops.SetupCreated || !res[0].Delivered {
		t.Fatalf("setup -group = %+v, %v\n%s", res, err, out.String())
	}
	checks := ops.RunDoctor(context.Background(), env.Config, &ops.DoctorOpts{Projects: []string{appProject}, HookToken: maintainerTok, Schema: schema})
	want := fmt.Sprintf("webhook %d of group platform sends", res[0].HookID)
	if !strings.Contains(lines(levels(checks, ops.CheckOK)), want) {
		t.Errorf("doctor does not accept the group's webhook (%q):\n%s", want, lines(checks))
	}
	if _, err := ops.RunSetup(context.Background(), env.Config, ops.SetupOpts{Owners: []platform.HookOwner{{Group: true, ID: "platform"}},
		Schema: schema, Out: &out}); err == nil || !strings.Contains(err.Error(), "platform") || !strings.Contains(out.String(), "Owner of the group") {
		t.Errorf("setup -group as the robot (no Owner) = %v, want a failure saying an Owner's token is needed:\n%s", err, out.String())
	}
}

// TestSetupRetriesGitLabFailures: a create whose answer is lost (500 after
// it took effect) and a rate-limited test (GitLab allows five a minute)
// are retried without creating a second webhook.
func TestSetupRetriesGitLabFailures(t *testing.T) {
	t.Parallel()
	env, schema := newDayOneEnv(t)
	env.GitLab.InjectFault(gitlabfake.Fault{Method: "POST", PathPattern: "/api/v4/projects/*/hooks", Status: 500, Times: 1, AfterEffect: true})
	env.GitLab.InjectFault(gitlabfake.Fault{Method: "POST", PathPattern: "/api/v4/projects/*/hooks/*/test/*", Status: 429, RetryAfter: "3", Times: 1}) // above the client's own 2 s retry
	var out bytes.Buffer
	res, err := ops.RunSetup(context.Background(), env.Config, ops.SetupOpts{Owners: []platform.HookOwner{{ID: appProject}},
		HookToken: maintainerTok, Schema: schema, Out: &out})
	t.Logf("setup:\n%s", out.String())
	if err != nil || len(res) != 1 || !res[0].Delivered {
		t.Fatalf("setup = %+v, %v", res, err)
	}
	if n := strings.Count(out.String(), "trying again"); n != 2 {
		t.Errorf("%d retries reported, want 2 (the lost create, the 429)", n)
	}
	if hooks := env.GitLab.ProjectHooks(env.Project.ID + 1); len(hooks) != 1 {
		t.Errorf("%d webhooks after a retried create, want 1", len(hooks))
	}
}

// TestSetupLeavesAnotherInstallationsHook: a hook named changebot that
// sends to another URL is not repointed without Force (the owner fails,
// saying what would change and how to force); with Force it is.
func TestSetupLeavesAnotherInstallationsHook(t *testing.T) {
	t.Parallel()
	env, schema := newDayOneEnv(t)
	appID := env.Project.ID + 1 // platform/app
	other := "https://other-bot.example/webhooks/gitlab"
	env.GitLab.AddProjectHook(appID, gitlabfake.HookSpec{URL: other, Name: ops.WebhookName, Token: "their-secret"})
	setup := func(force bool) ([]ops.SetupResult, string, error) {
		var out bytes.Buffer
		res, err := ops.RunSetup(context.Background(), env.Config, ops.SetupOpts{Owners: []platform.HookOwner{{ID: appProject}},
			HookToken: maintainerTok, Schema: schema, NoTest: true, Force: force, Out: &out})
		return res, out.String(), err
	}
	_, out, err := setup(false)
	hooks := env.GitLab.ProjectHooks(appID)
	if err == nil || len(hooks) != 1 || hooks[0].URL != other || hooks[0].Token != "their-secret" {
		t.Fatalf("setup without -force = %v, hooks %+v; want a failure and the other bot's hook untouched\n%s", err, hooks, out)
	}
	for _, want := range []string{"sends to " + other, "URL " + other + " → " + env.Config.ExternalURL + config.GitLabWebhookPath, "-force"} {
		if !strings.Contains(out, want) {
			t.Errorf("setup without -force says:\n%s\nwant it to contain %q", out, want)
		}
	}
	res, out, err := setup(true)
	hooks = env.GitLab.ProjectHooks(appID)
	if err != nil || len(res) != 1 || res[0].Action != ops.SetupUpdated || len(hooks) != 1 || hooks[0].URL != env.Config.ExternalURL+config.GitLabWebhookPath {
		t.Fatalf("setup -force = %+v, %v, hooks %+v; want the hook repointed\n%s", res, err, hooks, out)
	}
}

// TestSetupWordsAnUnknownProjectAsDoctor: setup of a project GitLab does
// not show (404) says so as doctor does, not as a raw HTTP answer.
func TestSetupWordsAnUnknownProjectAsDoctor(t *testing.T) {
	t.Parallel()
	env, schema := newDayOneEnv(t)
	var out bytes.Buffer
	_, err := ops.RunSetup(context.Background(), env.Config, ops.SetupOpts{Owners: []platform.HookOwner{{ID: "nope/x"}},
		Schema: schema, NoTest: true, Out: &out})
	want := "FAIL project nope/x: not found, or not visible to the robot"
	if err == nil || !strings.Contains(out.String(), want) || strings.Contains(out.String(), "404") {
		t.Errorf("setup of nope/x = %v:\n%s\nwant %q and no raw 404", err, out.String(), want)
	}
}

// TestDoctorHidesTheDatabasePassword: an unreachable database is named in
// the FAIL line without its password, in PostgreSQL's key=value form and in
// a URL's password= parameter alike (the trial found both printed).
func TestDoctorHidesTheDatabasePassword(t *testing.T) {
	t.Parallel()
	const secretDBPassword = "db-pa55word-XYZZY"
	env, schema := newDayOneEnv(t)
	for _, dsn := range []string{
		"host=127.0.0.1 port=1 user=u password=" + secretDBPassword + " dbname=x connect_timeout=2",
		"postgres://u@127.0.0.1:1/x?password=" + secretDBPassword + "&connect_timeout=2",
	} {
		cfg := env.Config
		cfg.DatabaseURL = dsn
		checks := ops.RunDoctor(context.Background(), cfg, &ops.DoctorOpts{Projects: []string{appProject}, Schema: schema})
		out := lines(checks)
		if !strings.Contains(lines(levels(checks, ops.CheckFail)), "database ") {
			t.Errorf("%s: no database FAIL:\n%s", dsn, out)
		}
		if strings.Contains(out, secretDBPassword) {
			t.Errorf("doctor printed the database password:\n%s", out)
		}
	}
}

// TestDoctorNamesTheHookToken: with -hook-token-file, doctor says whose
// token it reads the webhooks with; a refused one is a FAIL naming the hook
// token (not the robot's, which is fine) and skipping the webhook checks,
// on GitLab and on GitHub, through ops.RunDoctor and the command line.
func TestDoctorNamesTheHookToken(t *testing.T) {
	t.Parallel()
	gl, glSchema := newDayOneEnv(t)
	gh, ghSchema, _ := newGitHubDayOneEnv(t)
	tests := []struct {
		name, platform string
		env            *demo.Env
		schema, token  string
		wantFail       string // "" : no hook token FAIL
		wantOK         string
	}{
		{"gitlab refused", "GitLab", gl, glSchema, "not-a-token",
			"hook token (-hook-token-file): GitLab refused it (401): revoked, expired or mistyped, so no webhook is checked", ""},
		{"gitlab maintainer", "GitLab", gl, glSchema, maintainerTok, "", "hook token (-hook-token-file): user mia"},
		{"github refused", "GitHub", gh, ghSchema, "not-a-token",
			"hook token (-hook-token-file): GitHub refused it (401): revoked, expired or mistyped, so no webhook is checked", ""},
		{"github administrator", "GitHub", gh, ghSchema, maintainerTok, "", "hook token (-hook-token-file): user mia"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checks := ops.RunDoctor(context.Background(), tt.env.Config, &ops.DoctorOpts{Projects: []string{appProject}, HookToken: tt.token, Schema: tt.schema})
			all, fails := lines(checks), lines(levels(checks, ops.CheckFail))
			if strings.Contains(fails, "robot token") || strings.Contains(all, "the robot may not read webhooks") {
				t.Errorf("the robot's token is blamed:\n%s", all)
			}
			if !strings.Contains(lines(levels(checks, ops.CheckOK)), "robot token: user changebot") {
				t.Errorf("the robot's token is not OK:\n%s", all)
			}
			if tt.wantFail == "" {
				if strings.Contains(fails, "hook token") || !strings.Contains(lines(levels(checks, ops.CheckOK)), tt.wantOK) {
					t.Errorf("want OK %q and no hook token FAIL:\n%s", tt.wantOK, all)
				}
				return
			}
			if !strings.Contains(fails, tt.wantFail) || !strings.Contains(fails, "in the -hook-token-file file") {
				t.Errorf("want FAIL %q with its fix:\n%s", tt.wantFail, all)
			}
			if strings.Contains(all, "webhook of "+appProject) {
				t.Errorf("webhooks checked with a refused token:\n%s", all)
			}
		})
	}
	var out, errOut bytes.Buffer
	code := cliMain([]string{"doctor", "-config", writeConfig(t, gl, glSchema), "-project", appProject, "-hook-token-file", tokenFile(t, "not-a-token")}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "FAIL hook token (-hook-token-file): GitLab refused it") {
		t.Errorf("changebot doctor -hook-token-file <bad token>: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

// TestDoctorDayOneSQLite: on a fresh SQLite install (no file yet, or a file
// serve has not migrated) the database is a WARN saying serve makes it, not
// a FAIL, and doctor creates no file.
func TestDoctorDayOneSQLite(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 200*time.Millisecond)
	dir := t.TempDir()
	missing, empty := filepath.Join(dir, "changebot.db"), filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{missing, "database: no SQLite file at " + missing + " yet, expected before the first start"},
		{empty, "database: SQLite file " + empty + " at migration version 0 of "},
	} {
		cfg := env.Config
		cfg.DatabaseURL = config.SQLiteURL(tt.path)
		checks := ops.RunDoctor(context.Background(), cfg, &ops.DoctorOpts{Projects: []string{demo.Project}})
		if f := lines(levels(checks, ops.CheckFail)); strings.Contains(f, "database") {
			t.Errorf("%s: a database FAIL on day one:\n%s", tt.path, lines(checks))
		}
		w := lines(levels(checks, ops.CheckWarn))
		if !strings.Contains(w, tt.want) || !strings.Contains(w, "changebot serve") {
			t.Errorf("%s: want a WARN %q saying serve does it:\n%s", tt.path, tt.want, lines(checks))
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("doctor made %s (%v)", missing, err)
	}
}
