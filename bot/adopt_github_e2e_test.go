package bot

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/platform/github/githubfake"
	"changebot/store"
	"changebot/templates"
)

// adoptGitHubEnv is a GitHub test environment where adoption is on for the
// demo repository, whose default branch holds adoptPolicy, checks take ci,
// and a running bot.
func adoptGitHubEnv(t *testing.T, ci time.Duration) (*demo.Env, *App) {
	t.Helper()
	env := newGitHubTestEnv(t, true, ci)
	env.Config.AdoptProjects = []string{demo.Project}
	if env.GitHub.PushFiles(env.Repo.ID, env.Repo.DefaultBranch, demo.Developer, "Add the path rules",
		map[string]string{".changebot.yml": adoptPolicy}) == "" {
		t.Fatal("pushing .changebot.yml failed")
	}
	app, _ := startBotWithOpts(t, env, demo.Poll, &AppOpts{})
	return env, app
}

// openDeveloperPull makes the demo developer open a pull request changing
// one file, with labels.
func openDeveloperPull(t *testing.T, env *demo.Env, branch string, labels ...string) int64 {
	t.Helper()
	n := env.GitHub.OpenPullAsUser(githubfake.DeveloperPull{RepoID: env.Repo.ID, Login: demo.Developer, Head: branch,
		Base: env.Repo.DefaultBranch, Title: "Raise payments-api replicas to 7",
		Files: map[string]string{"services/payments-api/prod.yaml": "replicas: 7\n"}, Labels: labels})
	if n == 0 {
		t.Fatal("the fake GitHub opened no pull request")
	}
	return n
}

// waitAdoptedOn waits for the change of request n on platform, 30 s at most.
func waitAdoptedOn(t *testing.T, app *App, platformName string, projectID, n int64) store.Operation {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		op, err := app.Store().FindOperationByMR(context.Background(), app.Store().DB(), platformName, projectID, n)
		if err == nil {
			return op
		}
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("#%d was never adopted", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// robotComments are the comments on pull request n not written by people
// of the demo.
func robotComments(env *demo.Env, n int64) []githubfake.Comment {
	var out []githubfake.Comment
	for _, c := range env.GitHub.Comments(env.Repo.ID, n) {
		if c.Login == demo.Robot {
			out = append(out, c)
		}
	}
	return out
}

// TestGitHubAdoptLabelledPullRequestReachesValidated is issue 25's
// acceptance on GitHub: a developer's labelled pull request goes to
// VALIDATED with one merge, the reviewer robots' approvals and one status
// comment, and the robot opens nothing and pushes nothing.
func TestGitHubAdoptLabelledPullRequestReachesValidated(t *testing.T) {
	t.Parallel()
	env, app := adoptGitHubEnv(t, 200*time.Millisecond)
	n := openDeveloperPull(t, env, "dev/replicas", "changebot")
	before, _ := env.GitHub.PullRequest(env.Repo.ID, n)
	op := waitAdoptedOn(t, app, store.PlatformGitHub, env.Repo.ID, n)
	if !op.Adopted || op.RequestedBy != demo.Developer || op.HeadSHA != before.HeadSHA || op.SubjectID != "payments-api" {
		t.Fatalf("adopted change %+v, want adopted for %s at %s, binding payments-api", op, demo.Developer, before.HeadSHA)
	}
	if _, err := demo.FollowChange(context.Background(), env, op.ID, 60*time.Second, func(api.ChangeView) {}); err != nil {
		t.Fatal(err)
	}
	snap, _ := env.GitHub.PullRequest(env.Repo.ID, n)
	if !snap.Merged || len(snap.Approvals) == 0 || snap.HeadSHA != before.HeadSHA {
		t.Fatalf("pull request %+v, want merged at the developer's head %s with approvals", snap, before.HeadSHA)
	}
	if c := env.GitHub.CallCount("POST", "/repos/*/*/pulls"); c != 0 {
		t.Errorf("%d pull requests opened by the robot, want none", c)
	}
	if c := env.GitHub.CallCount("PUT", "/repos/*/*/pulls/*/merge"); c != 1 {
		t.Errorf("merge calls = %d, want 1", c)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var notes []string
		for _, c := range robotComments(env, n) {
			if _, ok := templates.ParseMarker(c.Body); ok {
				notes = append(notes, c.Body)
			}
		}
		if len(notes) > 1 {
			t.Fatalf("%d status comments, want 1", len(notes))
		}
		if len(notes) == 1 && strings.Contains(notes[0], "VALIDATED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status comment never showed VALIDATED: %q", notes)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestGitHubAdoptRules: an unlabelled pull request is left alone; a
// reader's "@robot merge" gets exactly one reply refusing it; removing the
// label of an adopted one lets it go with the pull request open.
func TestGitHubAdoptRules(t *testing.T) {
	t.Parallel()
	// Checks that outlast the test: the adopted change is in progress when
	// its label is removed.
	env, app := adoptGitHubEnv(t, time.Hour)
	ctx := context.Background()
	alone := openDeveloperPull(t, env, "dev/alone")
	env.GitHub.AddComment(env.Repo.ID, alone, demo.Reporter, "@"+demo.Robot+" merge")
	letGo := openDeveloperPull(t, env, "dev/letgo", "changebot")
	op := waitAdoptedOn(t, app, store.PlatformGitHub, env.Repo.ID, letGo)
	env.GitHub.SetLabelsAs(env.Repo.ID, letGo, demo.Developer, nil, []string{"changebot"})
	deadline := time.Now().Add(30 * time.Second)
	for {
		cur, err := app.Store().GetOperation(ctx, app.Store().DB(), op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Status == store.StatusClosed || cur.Status == store.StatusValidated {
			if cur.Status != store.StatusClosed || !strings.Contains(cur.Detail, "let go") {
				t.Fatalf("change %s (%s), want CLOSED saying it let go", cur.Status, cur.Detail)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the change is %s, want CLOSED after the label was removed", cur.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if snap, _ := env.GitHub.PullRequest(env.Repo.ID, letGo); snap.State != "open" {
		t.Errorf("pull request %s, want it left open", snap.State)
	}
	time.Sleep(500 * time.Millisecond)
	replies := robotComments(env, alone)
	if len(replies) != 1 || !strings.Contains(replies[0].Body, "write permission") {
		t.Fatalf("replies to a reader's merge: %+v, want one naming the write permission", replies)
	}
	if _, err := app.Store().FindOperationByMR(ctx, app.Store().DB(), store.PlatformGitHub, env.Repo.ID, alone); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FindOperationByMR of the unlabelled pull request: %v, want no change", err)
	}
}

// TestGitHubAdoptReviewRequestAnsweredOnce: the robot requested as a
// reviewer of a pull request not opted in answers once how to opt in, also
// when requested again.
func TestGitHubAdoptReviewRequestAnsweredOnce(t *testing.T) {
	t.Parallel()
	env, _ := adoptGitHubEnv(t, 200*time.Millisecond)
	n := openDeveloperPull(t, env, "dev/review")
	env.GitHub.RequestReviewAs(env.Repo.ID, n, demo.Developer, demo.Robot)
	deadline := time.Now().Add(30 * time.Second)
	for len(robotComments(env, n)) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	env.GitHub.RequestReviewAs(env.Repo.ID, n, demo.Developer, demo.Robot)
	time.Sleep(time.Second)
	got := robotComments(env, n)
	if len(got) != 1 || !strings.Contains(got[0].Body, "pull request") || !strings.Contains(got[0].Body, "@"+demo.Robot+" merge") {
		t.Fatalf("robot comments %+v, want one saying how to hand the pull request over", got)
	}
}
