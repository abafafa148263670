package flows_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/gitlab/gitlabfake"
)

// TestCancelDuringCreateClosesWhatItOpened is issue 9 defect 6: a /cancel
// that lands while the create job runs (after the branch and the commit,
// before the merge request) used to leave an open merge request and its
// branch that no change owns. Whatever the cancelled change opened is
// closed, and the change ends CLOSED.
func TestCancelDuringCreateClosesWhatItOpened(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// at is the GitLab call of the create job during which the cancel
		// lands.
		method, suffix string
	}{
		{"before the merge request is opened", http.MethodPost, "/merge_requests"},
		{"before the commit", http.MethodPost, "/repository/commits"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, nil)
			p := flowtest.Change("svc")
			p.ApprovalFirst = false // straight to CREATE_STARTED
			op := h.Submit(t, p)
			var once sync.Once
			h.GitLab.SetBeforeCall(func(method, path string) {
				if method != tc.method || !strings.HasSuffix(path, tc.suffix) {
					return
				}
				once.Do(func() {
					_, err := h.Engine.Act(context.Background(), op.ID, rules.ActionCancel, rules.ActionParams{Actor: "olivia", Source: "api"})
					if err != nil {
						t.Errorf("cancel during the create job: %v", err)
					}
				})
			})
			h.WorkUntilIdle(t)
			h.GitLab.SetBeforeCall(nil)

			h.RequireStep(t, op.ID, rules.Closed)
			if mr, ok := h.GitLab.MergeRequest(h.Project.ID, 1); ok && mr.State != "closed" {
				t.Errorf("the cancelled change's merge request !1 is %s, want closed", mr.State)
			}
			if branch := "changebot/" + op.ID; h.GitLab.HasBranch(h.Project.ID, branch) {
				t.Errorf("the cancelled change's branch %s is still there", branch)
			}
		})
	}
}

// TestCancelAfterCreateFailedDeletesItsBranch is issue 9 defect 6: a change
// whose create job pushed its branch but could not open the merge request
// (CREATE_FAILED, no merge request recorded) is cancelled: its branch goes
// too, and the change ends CLOSED.
func TestCancelAfterCreateFailedDeletesItsBranch(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	p := flowtest.Change("svc")
	p.ApprovalFirst = false
	op := h.Submit(t, p)
	h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: "/api/v4/projects/*/merge_requests", Status: 403})
	h.WorkUntilIdle(t)
	h.GitLab.ClearFaults()
	h.RequireStep(t, op.ID, rules.CreateFailed)
	branch := "changebot/" + op.ID
	if !h.GitLab.HasBranch(h.Project.ID, branch) {
		t.Fatalf("the create job left no branch %s to clean up", branch)
	}
	if _, err := h.Engine.Act(context.Background(), op.ID, rules.ActionCancel, rules.ActionParams{Actor: "olivia", Source: "api"}); err != nil {
		t.Fatal(err)
	}
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.Closed)
	if h.GitLab.HasBranch(h.Project.ID, branch) {
		t.Errorf("the cancelled change's branch %s is still there", branch)
	}
}

// TestCancelCleanupAfterARace is issue 9 defect 6 when neither the cancel
// nor the create job can see what was opened: the create job opens the
// merge request while the cancel, having found none, deletes the branch,
// and the job's answer is lost (it never learns the change was cancelled;
// its retry finds the change CLOSED and does nothing). A cleanup job, due
// once no create attempt can still be running, closes the merge request.
func TestCancelCleanupAfterARace(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	p := flowtest.Change("svc")
	p.ApprovalFirst = false
	op := h.Submit(t, p)
	// The create job pushes its branch; stop it before the merge request.
	h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: "/api/v4/projects/*/merge_requests", Status: 500, Times: 1})
	h.WorkUntilIdle(t)
	source := "changebot/" + op.ID
	var once sync.Once
	h.GitLab.SetBeforeCall(func(method, path string) {
		if method == http.MethodDelete && strings.Contains(path, "/repository/branches/") {
			// The create job's merge request lands between the cancel's
			// look for one and its branch deletion.
			once.Do(func() {
				_, err := h.ClientAs(t, flowtest.Robot).CreateMergeRequest(context.Background(), h.Project.ID,
					platform.CreateMRParams{SourceBranch: source, TargetBranch: "main", Title: "t"})
				if err != nil {
					t.Errorf("opening the racing merge request: %v", err)
				}
			})
		}
	})
	if _, err := h.Engine.Act(context.Background(), op.ID, rules.ActionCancel, rules.ActionParams{Actor: "olivia", Source: "api"}); err != nil {
		t.Fatal(err)
	}
	h.GitLab.SetBeforeCall(nil)
	h.RunFor(t, 10*time.Minute)
	h.RequireStep(t, op.ID, rules.Closed)
	mr, ok := h.GitLab.MergeRequest(h.Project.ID, 1)
	if !ok {
		t.Fatal("the racing merge request !1 does not exist: the test did not reproduce the race")
	}
	if mr.State != "closed" {
		t.Errorf("the cancelled change's merge request !1 is %s, want closed", mr.State)
	}
}
