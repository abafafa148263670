package bot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"changebot/templates"
)

// TestGitHubSIGKILLWhileWaitingForChecksThenRestart is
// TestSIGKILLWhileWaitingForPipelineThenRestart on githubfake (issue 15
// acceptance): `changebot serve` on GitHub is killed with SIGKILL while its
// change waits for the pull request's checks, the checks finish while it is
// down (their webhooks are lost: nobody listens), and the restarted bot
// carries the change to VALIDATED from the database, merged once, its one
// status comment becoming current; on PostgreSQL and on a SQLite file.
func TestGitHubSIGKILLWhileWaitingForChecksThenRestart(t *testing.T) {
	t.Parallel()
	for _, engine := range testEngines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			testGitHubSIGKILLThenRestart(t, engine)
		})
	}
}

func testGitHubSIGKILLThenRestart(t *testing.T, engine string) {
	env := newGitHubTestEnv(t, true, 3*time.Second)
	addr := env.Listener.Addr().String()
	_ = env.Listener.Close() // the subprocess listens there
	cfgFile := filepath.Join(t.TempDir(), "changebot.yaml")
	yaml := "settings:\n  poll.short_interval: 300ms\n  poll.short_count: \"50\"\n  poll.long_interval: 1s\n  note.delay: 100ms\n  jobs.rescue_after: 2s\n"
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &strings.Builder{}
	p := &botProcess{t: t, logs: logs, env: append([]string{cfgFile,
		"CHANGEBOT_PLATFORM=github",
		"CHANGEBOT_LISTEN=" + addr,
		"CHANGEBOT_GITHUB_URL=" + env.GitHub.URL(),
		"CHANGEBOT_GITHUB_TOKEN=" + demoRobotToken,
		"CHANGEBOT_REVIEWER_TOKENS=" + strings.Join(env.Config.ReviewerTokens, ","),
		"CHANGEBOT_WEBHOOK_SECRETS=" + demoWebhookSecret,
		"CHANGEBOT_CALLBACK_SECRET=" + demoCallbackSecret,
		"CHANGEBOT_API_TOKENS=submitter:" + demoAPIToken,
		"CHANGEBOT_APPROVAL_URL=" + env.Approvals.URL(),
		"CHANGEBOT_EXTERNAL_URL=" + env.BaseURL,
		"CHANGEBOT_LOG_LEVEL=warn",
	}, databaseEnv(t, engine)...)}
	defer func() {
		if t.Failed() {
			t.Logf("bot output:\n%s", logs.String())
		}
	}()
	p.start()
	defer p.kill()
	waitListening(t, addr)
	ctx := context.Background()
	opID, err := submitDemoChange(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	waitStep(t, env, opID, "CREATE_MR_OPENED", 30*time.Second)
	p.kill()
	time.Sleep(4 * time.Second) // the checks finish while the bot is dead
	lost := 0
	for _, h := range env.GitHub.Webhooks() {
		if h.Status == 0 && (h.Event == "check_run" || h.Event == "check_suite" || h.Event == "workflow_run") {
			lost++
		}
	}
	if lost == 0 {
		t.Fatal("no check webhook was lost while the bot was dead: the test did not test the restart")
	}
	p.start()
	waitListening(t, addr)
	view, err := followChange(ctx, env, opID, 60*time.Second, func(changeView) {})
	if err != nil {
		t.Fatal(err)
	}
	if view.Status != "VALIDATED" {
		t.Fatalf("status %s", view.Status)
	}
	pr, _ := env.GitHub.PullRequest(env.Repo.ID, view.MergeRequest.IID)
	if !pr.Merged || len(pr.Approvals) != 2 {
		t.Fatalf("pull request %+v: want merged with both reviewers' approvals", pr)
	}
	// Merged once across the kill: the restarted bot did not merge again.
	if n := env.GitHub.CallCount("PUT", "/repos/*/*/pulls/*/merge"); n != 1 {
		t.Errorf("merge calls = %d, want 1", n)
	}
	// The same bound as GitLab's test on each engine.
	fresh := 10 * time.Second
	if engine == EngineSQLite {
		fresh = 30 * time.Second
	}
	deadline := time.Now().Add(fresh)
	for {
		var body string
		n := 0
		for _, c := range env.GitHub.Comments(env.Repo.ID, view.MergeRequest.IID) {
			if _, ok := templates.ParseMarker(c.Body); ok {
				body = c.Body
				n++
			}
		}
		if n > 1 {
			t.Fatalf("%d status comments after the restart, want 1", n)
		}
		if strings.Contains(body, "<sub>VALIDATED · step") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after VALIDATED the status comment still says:\n%s", fresh, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
