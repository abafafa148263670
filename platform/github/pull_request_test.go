package github_test

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"changebot/platform"
	"changebot/platform/github"
	"changebot/platform/github/githubfake"
)

// TestRebaseHeadMoved (issue 21 point 2): a push to the head between
// Rebase's read of the pull request and its update-branch makes githubfake
// answer 422 "expected head sha didn't match current head ref." as GitHub
// does (docs.github.com "Update a pull request branch": expected_head_sha
// "If the expected SHA does not match the pull request's HEAD, you will
// receive a 422 Unprocessable Entity status"); the adapter returns
// platform.ErrHeadMoved with the real status, never a conflict, and sets
// no update in progress. The next Rebase, on the new head, is accepted.
func TestRebaseHeadMoved(t *testing.T) {
	t.Parallel()
	f := newFakeEnv(t, githubfake.Options{}, githubfake.RepoSpec{Strict: true, RequiredContexts: []string{"build"}}, github.Config{})
	_, mr := change(t, f, "feature")
	f.env.WaitIdle(t)
	f.srv.PushToBranch(f.repo.ID, "main", "outsider") // behind: update-branch is due
	ctx := t.Context()
	var pushed string
	var once sync.Once
	f.srv.SetBeforeCall(func(method, path string) {
		if method != http.MethodPut || !strings.HasSuffix(path, "/update-branch") {
			return
		}
		once.Do(func() { // a fix pushed to the head meanwhile, in a file of its own
			cm, err := f.c.CreateCommit(ctx, f.repo.ID, platform.CommitParams{Branch: "feature", Message: "fix",
				Actions: []platform.FileAction{{Action: "create", FilePath: "fix.txt", Content: "fix"}}})
			if err != nil {
				t.Errorf("pushing to the head: %v", err)
			}
			pushed = cm.SHA
		})
	})
	err := f.c.Rebase(ctx, f.repo.ID, mr.IID)
	var pe *platform.Error
	if !errors.Is(err, platform.ErrHeadMoved) || errors.Is(err, platform.ErrConflict) || !errors.As(err, &pe) ||
		pe.Status != http.StatusUnprocessableEntity || pe.Message != "expected head sha didn't match current head ref." {
		t.Fatalf("Rebase with the head moved meanwhile: %v; want ErrHeadMoved, 422 with GitHub's message", err)
	}
	got, err := f.c.MergeRequest(ctx, f.repo.ID, mr.IID, true)
	if err != nil || got.SHA != pushed || got.RebaseInProgress {
		t.Fatalf("after the refused update: head %s (pushed %s), rebase in progress %v, %v; want the pushed head, none in progress", got.SHA, pushed, got.RebaseInProgress, err)
	}
	if err := f.c.Rebase(ctx, f.repo.ID, mr.IID); err != nil {
		t.Fatalf("Rebase on the new head: %v", err)
	}
	f.env.WaitIdle(t)
	if head := f.srv.BranchSHA(f.repo.ID, "feature"); head == pushed {
		t.Errorf("the accepted update-branch did not move the head from %s", pushed)
	}
}
