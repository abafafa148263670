package bot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	// The checks run 8 s: they finish after the kill below, which comes as
	// soon as the bot writes its first status comment.
	env := newGitHubTestEnv(t, true, 8*time.Second)
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
	// The bot dies while it writes its first status comment, right after it
	// opened the pull request: the comment's POST is held until the process
	// is gone.
	inComment, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	env.GitHub.SetBeforeCall(func(method, path string) {
		if method == "POST" && strings.HasSuffix(path, "/comments") {
			once.Do(func() { close(inComment); <-release })
		}
	})
	ctx := context.Background()
	opID, err := submitDemoChange(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	waitStep(t, env, opID, "CREATE_MR_OPENED", patience*30*time.Second)
	select {
	case <-inComment:
	case <-time.After(patience * 30 * time.Second):
		t.Fatal("the bot never wrote its status comment")
	}
	p.kill()
	close(release)
	env.GitHub.SetBeforeCall(nil)
	checkEvent := func(e string) bool { return e == "check_run" || e == "check_suite" || e == "workflow_run" }
	for _, h := range env.GitHub.Webhooks() {
		if checkEvent(h.Event) && h.Status != 0 && h.Action == "completed" {
			t.Fatalf("a completed %s webhook reached the bot before the kill: the checks finished too early for the test to test the restart", h.Event)
		}
	}
	// The checks finish while the bot is dead: their webhooks are lost.
	lost := 0
	for deadline := time.Now().Add(patience * 30 * time.Second); lost == 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no check webhook was lost while the bot was dead: the test did not test the restart")
		}
		for _, h := range env.GitHub.Webhooks() {
			if h.Status == 0 && checkEvent(h.Event) && h.Action == "completed" {
				lost++
			}
		}
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
