package flows_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"changebot/flows"
	"changebot/flows/flowtest"
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
					_, err := h.Engine.Act(context.Background(), op.ID, flows.ActionCancel, flows.ActionParams{Actor: "olivia", Source: "api"})
					if err != nil {
						t.Errorf("cancel during the create job: %v", err)
					}
				})
			})
			h.WorkUntilIdle(t)
			h.GitLab.SetBeforeCall(nil)

			h.RequireStep(t, op.ID, flows.Closed)
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
	h.RequireStep(t, op.ID, flows.CreateFailed)
	branch := "changebot/" + op.ID
	if !h.GitLab.HasBranch(h.Project.ID, branch) {
		t.Fatalf("the create job left no branch %s to clean up", branch)
	}
	if _, err := h.Engine.Act(context.Background(), op.ID, flows.ActionCancel, flows.ActionParams{Actor: "olivia", Source: "api"}); err != nil {
		t.Fatal(err)
	}
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, flows.Closed)
	if h.GitLab.HasBranch(h.Project.ID, branch) {
		t.Errorf("the cancelled change's branch %s is still there", branch)
	}
}
