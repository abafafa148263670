package bot

import (
	"testing"
	"time"

	"changebot/demo"
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
	p := startKillableBot(t, env, engine, "CHANGEBOT_PLATFORM=github",
		"CHANGEBOT_GITHUB_URL="+env.GitHub.URL(), "CHANGEBOT_GITHUB_TOKEN="+demo.RobotToken)
	// The bot dies while it writes its first status comment, right after it
	// opened the pull request: the comment's POST is held until the process
	// is gone.
	opID := p.killAtFirstStatusComment(env, env.GitHub.SetBeforeCall, "/comments", patience*30*time.Second)
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
	view := p.restartUntilValidated(env, opID)
	pr, _ := env.GitHub.PullRequest(env.Repo.ID, view.MergeRequest.IID)
	if !pr.Merged || len(pr.Approvals) != 2 {
		t.Fatalf("pull request %+v: want merged with both reviewers' approvals", pr)
	}
	// Merged once across the kill: the restarted bot did not merge again.
	if n := env.GitHub.CallCount("PUT", "/repos/*/*/pulls/*/merge"); n != 1 {
		t.Errorf("merge calls = %d, want 1", n)
	}
	// The same bound as GitLab's test.
	waitStatusCurrent(t, func() []string {
		var bodies []string
		for _, c := range env.GitHub.Comments(env.Repo.ID, view.MergeRequest.IID) {
			bodies = append(bodies, c.Body)
		}
		return bodies
	})
}
