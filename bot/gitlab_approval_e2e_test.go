package bot

import (
	"context"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/flows"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// TestInGitLabApprovalCountsEachApproverOnce runs a project in the in-GitLab
// approval mode with two required approvers: a reviewer robot's approval
// does not count, carol's MR Hook approval and her "@bot approve" note count
// once, and dave's approval completes it; the change then merges and
// reaches VALIDATED.
func TestInGitLabApprovalCountsEachApproverOnce(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 100*time.Millisecond)
	env.Config.Settings = map[string]string{"approval.provider": "gitlab",
		"approval.approvers": demo.Approver + "," + demo.Developer, "approval.required": "2"}
	app, sc := startBot(t, env)
	ctx := context.Background()
	opID, iid := runUntil(t, env, "APPROVAL_SENT")
	if v, _ := demo.GetChange(ctx, env, opID); v.ApprovalFirst {
		t.Fatal("the in-GitLab approval mode must open the MR first")
	}
	if n := len(env.Approvals.Requests()); n != 0 {
		t.Fatalf("the external approval system was called %d times", n)
	}
	approvals := func() int {
		var n int
		if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM gitlab_approvals WHERE operation_id = $1`, opID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	from := len(env.GitLab.Webhooks())
	env.GitLab.ApproveAsUser(env.Project.ID, iid, demo.Reviewers[0].Name) // a robot: never counts
	env.GitLab.ApproveAsUser(env.Project.ID, iid, demo.Approver)
	env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Approver, "@"+demo.Robot+" approve")
	waitEvent(t, app, opID, func(ev store.Event) bool { return ev.Type == flows.EventApproval && ev.Actor == demo.Approver })
	// The three inputs' webhooks (and the bot's own since) are handled
	// before the approvals are counted.
	flushHooks(t, env)
	waitHandled(t, app, hookKeys(answeredHooks(env, from, ""))...)
	if n := approvals(); n != 1 {
		t.Fatalf("approvals counted = %d, want 1 (carol once, the robot never)", n)
	}
	if v, _ := demo.GetChange(ctx, env, opID); v.Step.Name != "APPROVAL_SENT" {
		t.Fatalf("one of two approvals moved the change to %s", v.Step.Name)
	}
	env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Developer, "/approve looks good")
	if _, err := demo.FollowChange(ctx, env, opID, 60*time.Second, func(api.ChangeView) {}); err != nil {
		t.Fatal(err)
	}
	if n := approvals(); n != 2 {
		t.Fatalf("approvals counted = %d, want 2", n)
	}
}

// TestInGitLabApprovalByGroup: with approval.approver_groups, a member of
// the group approves; someone outside it does not count.
func TestInGitLabApprovalByGroup(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 100*time.Millisecond)
	env.GitLab.AddGroup("platform/approvers", map[string]int{demo.Developer: 30})
	env.Config.Settings = map[string]string{"approval.provider": "gitlab", "approval.approver_groups": "platform/approvers"}
	app, sc := startBot(t, env)
	ctx := context.Background()
	opID, iid := runUntil(t, env, "APPROVAL_SENT")
	from := len(env.GitLab.Webhooks())
	env.GitLab.ApproveAsUser(env.Project.ID, iid, demo.Approver) // not in the group
	// Its Merge Request Hook is handled before nothing is asserted.
	flushHooks(t, env)
	approvedHooks := answeredHooks(env, from, gitlabfake.EventMergeRequest)
	if len(approvedHooks) == 0 {
		t.Fatal("the fake GitLab sent no Merge Request Hook for the approval")
	}
	waitHandled(t, app, hookKeys(approvedHooks)...)
	var n int
	if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM gitlab_approvals WHERE operation_id = $1`, opID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("an approval from outside the group counted: %d (%v)", n, err)
	}
	env.GitLab.ApproveAsUser(env.Project.ID, iid, demo.Developer)
	if _, err := demo.FollowChange(ctx, env, opID, 60*time.Second, func(api.ChangeView) {}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, app, opID, func(ev store.Event) bool { return ev.Type == flows.EventApproval && ev.Actor == demo.Developer })
}
