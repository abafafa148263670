package bot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/flows"
	"changebot/store"
	"changebot/store/postgres/pgtest"
	"changebot/templates"
)

// newGitHubTestEnv is newTestEnv on githubfake (demo.NewGitHubEnvAt).
func newGitHubTestEnv(t *testing.T, autoApprove bool, pipeline time.Duration) *demo.Env {
	t.Helper()
	env, err := demo.NewGitHubEnvAt(demo.Addrs{}, pgtest.URL(), autoApprove, pipeline, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	return env
}

// TestGitHubEndToEndReachesValidated is `changebot demo -platform github`
// as a test (issue 15 acceptance, the happy path): real HTTP between the
// bot, githubfake (signed webhooks to /webhooks/github) and the stand-in
// approval system, on PostgreSQL and on a SQLite file. The change takes
// the same path as on GitLab, GitHub ends with the pull request merged
// with both reviewer accounts' approvals at the head, and the change
// records github.
func TestGitHubEndToEndReachesValidated(t *testing.T) {
	t.Parallel()
	for _, engine := range testEngines {
		t.Run(engine, func(t *testing.T) { testGitHubEndToEndReachesValidated(t, engine) })
	}
}

func testGitHubEndToEndReachesValidated(t *testing.T, engine string) {
	env := newGitHubTestEnv(t, true, 200*time.Millisecond)
	app, _ := startBotOn(t, engine, env, demo.Poll, &AppOpts{})
	ctx := context.Background()
	opID, err := demo.SubmitChange(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	view, err := demo.FollowChange(ctx, env, opID, 60*time.Second, func(v api.ChangeView) { steps = append(steps, v.Step.Name) })
	if err != nil {
		t.Fatalf("%v (steps seen: %v)", err, steps)
	}
	if view.MergeRequest == nil || view.MergeRequest.IID == 0 {
		t.Fatalf("no pull request in %+v", view)
	}
	op, err := app.Store().GetOperation(ctx, app.Store().DB(), opID)
	if err != nil || op.Platform != store.PlatformGitHub || op.ProjectID != env.Repo.ID {
		t.Fatalf("operation platform %q project %d (%v), want github and repository %d", op.Platform, op.ProjectID, err, env.Repo.ID)
	}
	events, err := app.Store().ListEvents(ctx, app.Store().DB(), opID)
	if err != nil {
		t.Fatal(err)
	}
	if seq, err := store.VerifyChain(events); err != nil {
		t.Fatalf("hash chain broken at %d: %v", seq, err)
	}
	wantPath := []string{"APPROVAL_SENDING", "APPROVAL_SENT", "CREATE_STARTED", "CREATE_MR_OPENED",
		"CREATE_SUCCEEDED", "HANDLE_STARTED", "HANDLE_APPROVED", "HANDLE_MERGED"}
	var got []string
	for _, ev := range events {
		if ev.Type == store.EventSubmitted || ev.Type == store.EventTransition {
			got = append(got, flowsStepName(ev.ToStep))
		}
		if ev.Actor == store.PlatformGitLab {
			t.Errorf("event %d (%s) names gitlab as its actor on a GitHub change", ev.Seq, flowsStepName(ev.ToStep))
		}
	}
	// The deploy confirmation comes from the default branch's CI (a
	// check run or workflow run at the merge commit): CALLED_BACK or the
	// reconciler's step, whichever saw it first.
	if len(got) != len(wantPath)+1 || strings.Join(got[:len(wantPath)], ",") != strings.Join(wantPath, ",") {
		t.Fatalf("state path\n got %v\nwant %v then the deploy confirmation", got, wantPath)
	}
	pr, ok := env.GitHub.PullRequest(env.Repo.ID, view.MergeRequest.IID)
	if !ok || !pr.Merged || len(pr.Approvals) != 2 {
		t.Fatalf("pull request %+v: want merged with 2 approvals", pr)
	}
	if n := env.GitHub.CallCount("PUT", "/repos/*/*/pulls/*/merge"); n != 1 {
		t.Errorf("merge calls = %d, want 1", n)
	}
	// One status comment, eventually showing VALIDATED.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var notes []string
		for _, c := range env.GitHub.Comments(env.Repo.ID, pr.Number) {
			if _, ok := templates.ParseMarker(c.Body); ok {
				notes = append(notes, c.Body)
			}
		}
		if len(notes) > 1 {
			t.Fatalf("%d status comments, want 1", len(notes))
		}
		if len(notes) == 1 && strings.Contains(notes[0], "<sub>VALIDATED · step") {
			// It speaks GitHub's words (templates.StatusView.Platform).
			if want := fmt.Sprintf("pull request [#%d](", pr.Number); !strings.Contains(notes[0], want) || strings.Contains(notes[0], "merge request [!") {
				t.Errorf("the status comment does not name %s…):\n%s", want, notes[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status comment never showed VALIDATED: %q", notes)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestGitHubApproveCommentCountsForWriters: in approval mode on the
// platform (approval.provider gitlab, no approver named), a /approve
// comment on the pull request counts for a collaborator with write
// permission and not for one with read (issue 15 point 5: GitHub has no
// quick actions, so /approve is a comment); the change then merges and
// reaches VALIDATED. The robot and the reviewer accounts' own reviews
// never count.
func TestGitHubApproveCommentCountsForWriters(t *testing.T) {
	t.Parallel()
	env := newGitHubTestEnv(t, false, 100*time.Millisecond)
	env.Config.Settings = map[string]string{"approval.provider": "gitlab"}
	app, _ := startBot(t, env)
	ctx := context.Background()
	opID, number := runUntil(t, env, "APPROVAL_SENT")
	if n := len(env.Approvals.Requests()); n != 0 {
		t.Fatalf("the external approval system was called %d times", n)
	}
	env.GitHub.AddComment(env.Repo.ID, number, demo.Reporter, "/approve")
	waitEvent(t, app, opID, func(ev store.Event) bool { return ev.Type == store.EventRefused && ev.Actor == demo.Reporter })
	if v, _ := demo.GetChange(ctx, env, opID); v.Step.Name != "APPROVAL_SENT" {
		t.Fatalf("a read-only collaborator's /approve moved the change to %s", v.Step.Name)
	}
	env.GitHub.AddComment(env.Repo.ID, number, demo.Developer, "/approve looks good")
	if _, err := demo.FollowChange(ctx, env, opID, 60*time.Second, func(api.ChangeView) {}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, app, opID, func(ev store.Event) bool { return ev.Type == flows.EventApproval && ev.Actor == demo.Developer })
}
