package flows_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// movingUpdateBranch is the engine's adapter, except that its first Rebase
// answers as GitHub's update-branch does when the head moved between the
// adapter's read and its call (422 "expected head sha didn't match current
// head ref.", platform.ErrHeadMoved; docs/github.md): when push is set the
// head really moved (a developer's push to the source branch, recorded in
// the fake); otherwise the read after it still shows the old head.
type movingUpdateBranch struct {
	flows.Platform
	fake      *gitlabfake.Server
	projectID int64
	push      bool
	calls     atomic.Int32
	pushed    atomic.Value // string: the sha the push made
}

func (m *movingUpdateBranch) Rebase(ctx context.Context, projectID, iid int64) error {
	if m.calls.Add(1) > 1 {
		return m.Platform.Rebase(ctx, projectID, iid)
	}
	if m.push {
		mr, _ := m.fake.MergeRequest(m.projectID, iid)
		m.pushed.Store(m.fake.Push(m.projectID, mr.SourceBranch, flowtest.Requester, "A fix pushed meanwhile",
			map[string]string{"fix.yaml": "fix: true\n"}))
	}
	return fmt.Errorf("updating pull request #%d: %w", iid, &platform.Error{
		Method: http.MethodPut, Path: fmt.Sprintf("/repos/acme/config/pulls/%d/update-branch", iid),
		Status: http.StatusUnprocessableEntity, Kind: platform.ErrHeadMoved,
		Message: "expected head sha didn't match current head ref.",
	})
}

// TestUpdateBranchHeadMovedWaitsForTheNewHead (issue 21 point 2): GitHub's
// update-branch answering 422 because the head moved is a moved head, not
// a refusal: the change waits for the pipeline (checks) of the head it then
// reads and approves that head, as after a push, and merges; it never ends
// in HANDLE_FAILED. Before the fix startRebase took every refused call for
// "GitHub refuses to rebase".
func TestUpdateBranchHeadMovedWaitsForTheNewHead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		push bool
	}{
		{name: "the head moved: its pipeline and approvals", push: true},
		{name: "the read still shows the old head: one more round", push: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := &movingUpdateBranch{push: tc.push}
			// Approvals are of one head, as the GitHub adapter counts them.
			h := flowtest.New(t, &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: "ff", ResetApprovalsOnPush: true},
				Configure: func(c *flows.EngineConfig) {
					c.Platform = store.PlatformGitHub
					m.Platform = c.Adapter
					c.Adapter = m
				}})
			m.fake, m.projectID = h.GitLab, h.Project.ID
			op := h.ToMROpened(t, flowtest.Change("svc"))
			first := op.HeadSHA
			h.GitLab.PushToTarget(h.Project.ID, "main") // the pull request is behind: update-branch
			h.DeliverWebhooks(t)
			got := h.RunUntil(t, op.ID, rules.HandleMerged, time.Hour)
			steps := h.Steps(t, op.ID)
			if slices.Contains(steps, rules.HandleFailed) {
				t.Fatalf("steps %v: the moved head failed the change", steps)
			}
			if n := m.calls.Load(); n != 2 {
				t.Errorf("update-branch calls = %d, want 2 (the refused one, then one on the head read after it)", n)
			}
			// After the refused call the change waits for a pipeline again,
			// then approves before it merges.
			i := slices.Index(steps, rules.HandleApproved)
			if rest := steps[i+1:]; i < 0 || !slices.Contains(rest, rules.HandleAwaitPipeline) || !slices.Contains(rest, rules.HandleStarted) {
				t.Errorf("steps %v: no pipeline wait and approval round after the refused update-branch", steps)
			}
			if !tc.push {
				return
			}
			pushed, _ := m.pushed.Load().(string)
			if pushed == "" || pushed == first {
				t.Fatalf("the push made %q", pushed)
			}
			for _, reviewer := range []string{"reviewer1", "reviewer2"} {
				approved := false
				for _, c := range h.GitLab.Calls() {
					if c.User == reviewer && matches(pathApprove, c.Path) && strings.Contains(string(c.Body)+c.Query, pushed) {
						approved = true
					}
				}
				if !approved {
					t.Errorf("%s never approved the pushed head %s", reviewer, pushed)
				}
			}
			awaited := false
			for _, e := range h.Events(t, op.ID) {
				if rules.StepCode(e.ToStep) == rules.HandleAwaitPipeline && strings.Contains(string(e.Payload), pushed) {
					awaited = true
				}
			}
			if !awaited || got.MergeCommitSHA == "" {
				t.Errorf("no wait for the pipeline of the pushed head %s (merge commit %q)", pushed, got.MergeCommitSHA)
			}
		})
	}
}
