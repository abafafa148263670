package bot

import (
	"context"
	"slices"
	"strings"
	"testing"

	"changebot/demo"
	"changebot/ops"
	"changebot/platform"
	"changebot/platform/github/githubfake"
	"changebot/webhooks"
)

// newGitHubDayOneEnv is the GitHub demo with a second repository,
// platform/app, as an operator finds it on day one: no webhook, and
// reviewer-2 with read permission only. mia administers both.
func newGitHubDayOneEnv(t *testing.T) (*demo.Env, string, githubfake.Repo) {
	t.Helper()
	env := newGitHubTestEnv(t, true, 0)
	collaborators := map[string]string{demo.Robot: "write", demo.Reviewers[0].Name: "write", demo.Reviewers[1].Name: "read", maintainer: "admin"}
	app := env.GitHub.AddRepo(githubfake.RepoSpec{FullName: appProject, Collaborators: collaborators})
	env.GitHub.AddUser(maintainer, maintainerTok)
	env.GitHub.SetPermission(env.Repo.ID, maintainer, "admin")
	_, sc := startBot(t, env)
	return env, sc.Name, app
}

// TestDoctorOnGitHub: on GitHub, doctor checks the robot's token, each
// reviewer account and, per repository, that the robot and the reviewers
// have write permission and that an active webhook sends the needed
// events to the bot: a read-only reviewer, a missing webhook and a missing
// repository are FAILs with fixes; without a token allowed to read
// webhooks, a WARN says what to check by hand.
func TestDoctorOnGitHub(t *testing.T) {
	t.Parallel()
	env, schema, _ := newGitHubDayOneEnv(t)
	projects := []string{demo.Project, appProject, "platform/missing"}
	checks := ops.RunDoctor(context.Background(), env.Config, &ops.DoctorOpts{Projects: projects, Schema: schema, HookToken: maintainerTok})
	t.Logf("doctor:\n%s", lines(checks))
	wantFails := []string{
		"reviewer reviewer-2 may not approve in platform/app: its permission is read",
		"webhook of platform/app: none sends to " + env.Config.ExternalURL + "/webhooks/github",
		"repository platform/missing: not found",
	}
	fails := levels(checks, ops.CheckFail)
	if len(fails) != len(wantFails) {
		t.Fatalf("%d FAILs, want %d:\n%s", len(fails), len(wantFails), lines(checks))
	}
	for i, w := range wantFails {
		if !strings.HasPrefix(fails[i].What, w) || fails[i].Fix == "" {
			t.Errorf("FAIL %d = %q (fix %q), want it to start %q with a fix", i+1, fails[i].What, fails[i].Fix, w)
		}
	}
	for _, w := range []string{"robot token: user changebot", "reviewer token 1 (user reviewer-1): answers",
		"robot changebot may push and merge in platform/config (maintain)", "reviewers reviewer-1, reviewer-2 may approve in platform/config",
		"robot changebot may push and merge in platform/app (write)", "of platform/config sends pull_request, pull_request_review"} {
		if !strings.Contains(lines(levels(checks, ops.CheckOK)), w) {
			t.Errorf("no OK line says %q", w)
		}
	}
	// The robot (maintain) may not read webhooks: a WARN, not a FAIL.
	checks = ops.RunDoctor(context.Background(), env.Config, &ops.DoctorOpts{Projects: []string{demo.Project}, Schema: schema})
	if warns := lines(levels(checks, ops.CheckWarn)); !strings.Contains(warns, "webhook of platform/config: the robot may not read webhooks") ||
		len(levels(checks, ops.CheckFail)) != 0 {
		t.Errorf("without a hook token, want one WARN naming the webhook and no FAIL:\n%s", lines(checks))
	}
}

// TestSetupOnGitHub: setup creates the missing webhook of platform/app
// (JSON, the secret, every needed event, active) and asks GitHub for a
// ping; run again it changes nothing; -force writes the secret again;
// doctor then finds the webhook.
func TestSetupOnGitHub(t *testing.T) {
	t.Parallel()
	env, schema, app := newGitHubDayOneEnv(t)
	var out strings.Builder
	opts := ops.SetupOpts{Owners: []platform.HookOwner{{ID: appProject}}, HookToken: maintainerTok, Out: &out, Schema: schema}
	res, err := ops.RunSetup(context.Background(), env.Config, opts)
	if err != nil || len(res) != 1 || res[0].Action != ops.SetupCreated {
		t.Fatalf("first setup: %+v %v\n%s", res, err, out.String())
	}
	hooks := env.GitHub.RepoHooks(app.ID)
	if len(hooks) != 1 {
		t.Fatalf("%d webhooks, want 1", len(hooks))
	}
	h := hooks[0]
	want := slices.Clone(webhooks.GitHubEvents)
	slices.Sort(want)
	if h.URL != env.Config.ExternalURL+"/webhooks/github" || h.ContentType != "json" || h.Secret != demo.WebhookSecret || !h.Active ||
		!slices.Equal(h.Events, want) || h.Pings != 1 {
		t.Fatalf("webhook %+v", h)
	}
	if res, err = ops.RunSetup(context.Background(), env.Config, opts); err != nil || res[0].Action != ops.SetupUnchanged {
		t.Fatalf("second setup: %+v %v", res, err)
	}
	env.GitHub.AddRepoHook(app.ID, githubfake.Hook{URL: "https://elsewhere.example/hook", Events: []string{"push"}, Active: true})
	opts.Force = true
	if res, err = ops.RunSetup(context.Background(), env.Config, opts); err != nil || res[0].Action != ops.SetupUpdated || res[0].HookID != h.ID {
		t.Fatalf("forced setup: %+v %v", res, err)
	}
	if n := len(env.GitHub.RepoHooks(app.ID)); n != 2 {
		t.Fatalf("%d webhooks, want 2 (another URL's hook is left alone)", n)
	}
	checks := ops.RunDoctor(context.Background(), env.Config, &ops.DoctorOpts{Projects: []string{appProject}, Schema: schema, HookToken: maintainerTok})
	if !strings.Contains(lines(levels(checks, ops.CheckOK)), "of platform/app sends pull_request") {
		t.Errorf("doctor does not find the webhook setup made:\n%s", lines(checks))
	}
}
