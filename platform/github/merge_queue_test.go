package github_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"changebot/platform"
	"changebot/platform/github"
	"changebot/platform/github/githubfake"
)

// TestMergeQueueGraphQL (issue 22 point 4): against githubfake with main
// requiring a merge queue, MergeQueue detects it per branch; the REST
// merge is refused (405, ErrNotMergeable); AddToMergeTrain with a stale
// head is ErrHeadMoved and with the head enqueues once; MergeTrainCar reads
// the entry awaiting its checks, then merged once the group's checks
// pass; a pull request whose group checks fail has no entry
// (ErrNotFound). A 502 of the GraphQL endpoint is transient, never a
// refusal, and the next call goes through.
func TestMergeQueueGraphQL(t *testing.T) {
	t.Parallel()
	// The checks take 2 s, so that the entry is read while its group's
	// checks run (with instant checks the group may merge first).
	f := newFakeEnv(t, githubfake.Options{CIDuration: 2 * time.Second}, githubfake.RepoSpec{}, github.Config{})
	f.srv.SetMergeQueue(f.repo.ID, "main", true)
	ctx := t.Context()
	for branch, want := range map[string]bool{"main": true, "release": false} {
		if got, err := f.c.MergeQueue(ctx, f.repo.ID, branch); err != nil || got != want {
			t.Errorf("MergeQueue(%s) = %v, %v; want %v", branch, got, err, want)
		}
	}
	_, mr := change(t, f, "feature")
	f.env.WaitIdle(t)
	mr, err := f.c.MergeRequest(ctx, f.repo.ID, mr.IID, false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.c.Merge(ctx, f.repo.ID, mr.IID, platform.MergeParams{SHA: mr.SHA})
	if !errors.Is(err, platform.ErrNotMergeable) || platform.StatusOf(err) != http.StatusMethodNotAllowed {
		t.Fatalf("REST merge into a merge-queue branch: %v; want 405 ErrNotMergeable", err)
	}
	if err := f.c.AddToMergeTrain(ctx, f.repo.ID, mr.IID, f.srv.BranchSHA(f.repo.ID, "main"), false); !errors.Is(err, platform.ErrHeadMoved) {
		t.Fatalf("enqueue with a stale head: %v; want ErrHeadMoved", err)
	}
	f.srv.InjectFault(githubfake.Fault{Method: "POST", PathPattern: "/graphql", Status: http.StatusBadGateway, Times: 1})
	if err := f.c.AddToMergeTrain(ctx, f.repo.ID, mr.IID, mr.SHA, false); !platform.IsTransient(err) || platform.IsRefused(err) {
		t.Fatalf("enqueue answered 502: %v; want a transient error", err)
	}
	if err := f.c.AddToMergeTrain(ctx, f.repo.ID, mr.IID, mr.SHA, false); err != nil {
		t.Fatalf("enqueue at the head: %v", err)
	}
	car, err := f.c.MergeTrainCar(ctx, f.repo.ID, mr.IID)
	if err != nil || car.Status != "awaiting_checks" || car.PipelineStatus != "running" {
		t.Fatalf("entry after enqueue: %+v, %v; want awaiting_checks, running", car, err)
	}
	f.env.WaitIdle(t)
	car, err = f.c.MergeTrainCar(ctx, f.repo.ID, mr.IID)
	if err != nil || car.Status != "merged" {
		t.Fatalf("entry after the group's checks passed: %+v, %v; want merged", car, err)
	}
	if n, shas := f.srv.EnqueueCount(f.repo.ID, mr.IID); n != 1 || shas[0] != mr.SHA {
		t.Errorf("enqueued %d times %v, want once at %s", n, shas, mr.SHA)
	}
	if n := f.srv.CallCount("PUT", "/repos/*/*/pulls/*/merge"); n != 1 {
		t.Errorf("REST merges %d, want only the refused one", n)
	}

	f.srv.SetCIScript(f.repo.ID, githubfake.CIScript{MergeGroups: []string{"failure"}}) // the group's checks fail, the head's pass
	_, mr2 := change(t, f, "second")
	f.env.WaitIdle(t)
	mr2, _ = f.c.MergeRequest(ctx, f.repo.ID, mr2.IID, false)
	if err := f.c.AddToMergeTrain(ctx, f.repo.ID, mr2.IID, mr2.SHA, false); err != nil {
		t.Fatal(err)
	}
	f.env.WaitIdle(t)
	if _, err := f.c.MergeTrainCar(ctx, f.repo.ID, mr2.IID); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("entry after the group's checks failed: %v; want ErrNotFound", err)
	}
}
