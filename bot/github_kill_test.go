package bot

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"changebot/demo"
	"changebot/flows/rules"
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

// TestGitHubRestartWhileUpdatingTheBranch (issue 21 point 7): the pull
// request is behind its base under strict required checks, so the change
// asks GitHub's update-branch (202, asynchronous, no progress flag) and
// waits in HANDLE_REBASING. The bot is killed there and restarted at once,
// before GitHub has moved the head. The restarted bot knows from the
// database that the update it asked for has not landed: it neither asks
// for a second update nor approves or merges the old head; it waits for
// the new head, whose checks it waits for, and merges that once.
func TestGitHubRestartWhileUpdatingTheBranch(t *testing.T) {
	t.Parallel()
	for _, engine := range testEngines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			testGitHubRestartWhileUpdatingTheBranch(t, engine)
		})
	}
}

func testGitHubRestartWhileUpdatingTheBranch(t *testing.T, engine string) {
	env := newGitHubTestEnv(t, true, 300*time.Millisecond)
	p := startKillableBot(t, env, engine, "CHANGEBOT_PLATFORM=github",
		"CHANGEBOT_GITHUB_URL="+env.GitHub.URL(), "CHANGEBOT_GITHUB_TOKEN="+demo.RobotToken)
	env.GitHub.SetStrict(env.Repo.ID, true)
	// Long enough for a kill and a restart, and for the restarted bot's
	// first poll of the update, to fall inside the update: that poll waits
	// for River's scheduler, which runs on the leader only, until the dead
	// process's leadership has expired (about 18 s here).
	const updateTakes = 40 * time.Second
	env.GitHub.SetUpdateBranchDelay(updateTakes)
	// The base moves while the bot opens the pull request (after its
	// branch, before the pull request), so the pull request is behind:
	// moved from the fake's own call hook, not after the test has seen
	// CREATE_MR_OPENED, which a fast run passes between two looks.
	var once sync.Once
	env.GitHub.SetBeforeCall(func(method, path string) {
		if method == "POST" && strings.HasSuffix(path, "/pulls") {
			once.Do(func() { env.GitHub.PushToBranch(env.Repo.ID, "main", demo.Developer) })
		}
	})
	opID, err := demo.SubmitChange(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	waitStep(t, env, opID, "HANDLE_REBASING", patience*30*time.Second)
	env.GitHub.SetBeforeCall(nil)
	v, err := demo.GetChange(context.Background(), env, opID)
	if err != nil {
		t.Fatal(err)
	}
	// The update takes updateTakes: the head is still the bot's commit.
	before, _ := env.GitHub.PullRequest(env.Repo.ID, v.MergeRequest.IID)
	updates := func() int { return env.GitHub.CallCount("PUT", "/repos/*/*/pulls/*/update-branch") }
	if updates() != 1 {
		t.Fatalf("%d update-branch calls before the kill, want 1", updates())
	}
	// Killed between two polls of the update (every 300 ms), so that the
	// restarted bot polls at once rather than after River rescues a job
	// the dead process held: once the change's HANDLE_REBASING job waits
	// for its next poll, neither running nor due.
	waitFor(t, patience*30*time.Second, "the HANDLE_REBASING poll job to wait between two polls", func() bool {
		return p.betweenPolls(opID, rules.HandleRebasing)
	})
	p.kill()
	view := p.restartUntilValidated(env, opID)
	for _, e := range view.Events {
		if e.FromStep == int(rules.HandleRebasing) && e.ToStep == int(rules.HandleAwaitPipeline) && strings.Contains(string(e.Payload), before.HeadSHA) {
			t.Errorf("event %d left HANDLE_REBASING for the old head %s before the update landed: %s", e.Seq, before.HeadSHA, e.Payload)
		}
	}
	pr, _ := env.GitHub.PullRequest(env.Repo.ID, view.MergeRequest.IID)
	if !pr.Merged || pr.HeadSHA == before.HeadSHA {
		t.Fatalf("pull request %+v: want merged at the updated head, not %s", pr, before.HeadSHA)
	}
	if n := updates(); n != 1 {
		t.Errorf("update-branch calls = %d, want 1: the restarted bot asked again for an update already under way", n)
	}
	if n := env.GitHub.CallCount("PUT", "/repos/*/*/pulls/*/merge"); n != 1 {
		t.Errorf("merge calls = %d, want 1", n)
	}
}
