package bot

import (
	"context"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/flows/rules"
	"changebot/platform/github/githubfake"
)

// TestGitHubMergeQueueEndToEnd (issue 22 point 4, GitHub): on a branch
// that requires a merge queue, three changes all reach VALIDATED with no
// REST merge: each pull request is enqueued once (GraphQL
// enqueuePullRequest) at its head, GitHub's merge group checks run and
// GitHub merges it. In another repository a change whose merge group
// checks fail (its own checks passed) is dequeued and ends in
// HANDLE_FAILED, the reason readable in GET /api/v1/changes/{id}.
func TestGitHubMergeQueueEndToEnd(t *testing.T) {
	t.Parallel()
	g := newGitHubFailEnv(t)
	ctx := context.Background()

	r := g.addRepo("merge-queue", githubfake.RepoSpec{})
	g.GitHub.SetMergeQueue(r.ID, "main", true)
	var ops []string
	for range 3 {
		ops = append(ops, g.submitTo(t, r))
	}
	for _, op := range ops {
		v, err := demo.FollowChange(ctx, g.Env, op, patience*60*time.Second, func(api.ChangeView) {})
		if err != nil {
			t.Fatal(err)
		}
		if !g.hasStep(t, op, rules.HandleInTrain) {
			t.Errorf("change %s never waited in HANDLE_IN_TRAIN", op)
		}
		pr, _ := g.GitHub.PullRequest(r.ID, v.MergeRequest.IID)
		if !pr.Merged {
			t.Errorf("pull request %+v not merged", pr)
		}
		if n, shas := g.GitHub.EnqueueCount(r.ID, pr.Number); n != 1 || shas[0] != pr.HeadSHA {
			t.Errorf("pull request #%d enqueued %d times at %v, want once at its head %s", pr.Number, n, shas, pr.HeadSHA)
		}
	}
	if merges := g.callsTo(r, "PUT", "/merge"); len(merges) != 0 {
		t.Errorf("REST merge calls %+v, want none on a merge-queue branch", merges)
	}

	// The pull request's own checks pass, its merge group's fail.
	f := g.addRepo("merge-queue-fails", githubfake.RepoSpec{CI: &githubfake.CIScript{MergeGroups: []string{"failure"}}})
	g.GitHub.SetMergeQueue(f.ID, "main", true)
	op := g.submitTo(t, f)
	v := g.wait(t, op, "HANDLE_FAILED", 60*time.Second)
	if !strings.Contains(v.Detail, "merge queue of main") || !strings.Contains(v.Detail, "merge group checks did not succeed") {
		t.Errorf("detail %q, want the merge queue and its merge group checks named", v.Detail)
	}
	t.Logf("detail: %s", v.Detail)
	if pr, _ := g.GitHub.PullRequest(f.ID, v.MergeRequest.IID); pr.Merged || pr.State != "open" {
		t.Errorf("pull request %+v, want open and not merged", pr)
	}
	if n, _ := g.GitHub.EnqueueCount(f.ID, v.MergeRequest.IID); n != 1 {
		t.Errorf("enqueued %d times, want 1", n)
	}
}
