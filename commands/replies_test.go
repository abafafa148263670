package commands

import (
	"context"
	"slices"
	"strings"
	"testing"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/templates"
)

// accessByUser gives each user a project access level (0 for strangers);
// merging into main needs Developer.
type accessByUser map[string]int

func (accessByUser) CurrentUser(context.Context) (platform.User, error) {
	return platform.User{ID: 1, Username: "changebot"}, nil
}
func (accessByUser) ReviewerCount() int { return 0 }
func (accessByUser) Reviewer(context.Context, int) (platform.User, error) {
	return platform.User{}, nil
}
func (a accessByUser) MemberAccess(_ context.Context, _, userID int64) (int, error) {
	return a[userNames[userID]], nil
}
func (accessByUser) MergeRequest(context.Context, int64, int64, bool) (platform.MergeRequest, error) {
	return platform.MergeRequest{Author: platform.User{ID: 99, Username: "author"}}, nil
}
func (accessByUser) MergeAccessLevel(context.Context, int64, string) (int, bool, error) {
	return 40, true, nil // main is protected: Maintainers merge
}

// The people of the reply tests: alice requested the change (Developer),
// dev-a is a Developer, maint a Maintainer, ops an operator, guest nobody,
// carol an approver in GitLab.
var (
	userIDs   = map[string]int64{"alice": 2, "dev-a": 3, "maint": 4, "ops": 5, "guest": 6, "carol": 7}
	userNames = map[int64]string{2: "alice", 3: "dev-a", 4: "maint", 5: "ops", 6: "guest", 7: "carol"}
	access    = accessByUser{"alice": 30, "dev-a": 30, "maint": 40, "guest": 0, "carol": 30}
)

// replyHarness runs one note by user on a change at step and returns the
// flow fake, whose bodies are the rendered replies.
func replyHarness(t *testing.T, c Change, user, body string) *fakeFlow {
	t.Helper()
	return replyHarnessOn(t, "", c, user, body)
}

// replyHarnessOn is replyHarness on an installation of platformName
// ("gitlab", also "", or "github").
func replyHarnessOn(t *testing.T, platformName string, c Change, user, body string) *fakeFlow {
	t.Helper()
	r, err := templates.NewRenderer(nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeFlow{change: c, approvers: []string{"carol"}}
	x := NewExecutor(ExecutorConfig{Flow: f, Notes: &fakeNotes{seen: map[int64]bool{}}, Access: access, Renderer: r,
		Platform: platformName, Operators: []string{"ops"}})
	ev := platform.HookEvent{ProjectID: 5, User: platform.User{ID: userIDs[user], Username: user},
		Note: &platform.NoteHook{ID: 7, NoteableType: "MergeRequest", MRIID: 3, Body: body}}
	if _, err := x.HandleNote(context.Background(), 1, ev); err != nil {
		t.Fatal(err)
	}
	return f
}

// change is a change at step, requested by alice, on main.
func change(step rules.StepCode) Change {
	st := rules.MustStep(step)
	return Change{OperationID: "op_1", RequestedBy: "alice", TargetBranch: "main", MRIID: 3, Status: st.Status, Step: st}
}

// listed returns the commands a help reply lists, in order.
func listed(body string) []string {
	var out []string
	for line := range strings.Lines(body) {
		if rest, ok := strings.CutPrefix(line, "| `/"); ok {
			usage, _, _ := strings.Cut(rest, "`")
			name, _, _ := strings.Cut(usage, " ") // "/freeze [reason]"
			out = append(out, name)
		}
	}
	return out
}

// TestHelpListsWhatTheReaderMayRunNow (issue 13 point 7): /help lists only
// the commands that apply to the change in its state and that the reader's
// role and access allow (on a VALIDATED change /retry is not listed, which it
// was).
func TestHelpListsWhatTheReaderMayRunNow(t *testing.T) {
	t.Parallel()
	gitlabWaiting := change(rules.ApprovalSent)
	gitlabWaiting.AwaitsGitLabApproval, gitlabWaiting.TicketID = true, rules.GitLabTicket
	external := change(rules.ApprovalSent)
	external.ApprovalSystem, external.TicketID = true, "APR-1001"
	tests := []struct {
		name   string
		change Change
		user   string
		want   []string
	}{
		{name: "validated, requester", change: change(rules.CalledBack), user: "alice", want: []string{"status", "help"}},
		{name: "validated, operator", change: change(rules.CalledBack), user: "ops", want: []string{"status", "freeze", "unfreeze", "help"}},
		{name: "failed, maintainer may retry", change: change(rules.HandleFailed), user: "maint", want: []string{"retry", "status", "help"}},
		{name: "failed, requester without the right to merge", change: change(rules.HandleFailed), user: "alice", want: []string{"status", "cancel", "help"}},
		{name: "failed, operator who is no member", change: change(rules.HandleFailed), user: "ops", want: []string{"status", "cancel", "freeze", "unfreeze", "help"}},
		{name: "failed, stranger", change: change(rules.HandleFailed), user: "guest", want: []string{"status", "help"}},
		{name: "parked, operator may resume", change: change(rules.HandlePipelinePending), user: "ops", want: []string{"resume", "status", "cancel", "freeze", "unfreeze", "help"}},
		{name: "queued, maintainer", change: change(rules.HandleQueued), user: "maint", want: []string{"status", "help"}},
		{name: "queued, operator", change: change(rules.HandleQueued), user: "ops", want: []string{"resume", "status", "cancel", "freeze", "unfreeze", "help"}},
		{name: "parked, requester", change: change(rules.HandlePipelinePending), user: "alice", want: []string{"status", "cancel", "help"}},
		{name: "waiting in GitLab, approver", change: gitlabWaiting, user: "carol", want: []string{"status", "approve", "reject", "help"}},
		{name: "waiting in GitLab, requester", change: gitlabWaiting, user: "alice", want: []string{"status", "cancel", "help"}},
		{name: "waiting in the approval system, approver", change: external, user: "carol", want: []string{"status", "help"}},
		{name: "merged, requester", change: change(rules.HandleMerged), user: "alice", want: []string{"status", "help"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := replyHarness(t, tc.change, tc.user, "/help")
			if len(f.bodies) != 1 {
				t.Fatalf("%d replies, want 1", len(f.bodies))
			}
			if got := listed(f.bodies[0]); !slices.Equal(got, tc.want) {
				t.Errorf("/help by %s on %s lists %q, want %q:\n%s", tc.user, tc.change.Step.Name, got, tc.want, f.bodies[0])
			}
		})
	}
}

// TestRefusalSaysTheReason (issue 13 point 7): a refusal says whether the
// change's state, the reader's role or access, or the approval system is the
// reason, names the command once, and /approve on a change approved in the
// approval system points there, with its ticket's link when known.
func TestRefusalSaysTheReason(t *testing.T) {
	t.Parallel()
	external := change(rules.ApprovalSent)
	external.ApprovalSystem, external.TicketID, external.TicketURL = true, "APR-1001", "https://approvals.example.test/t/APR-1001"
	noTicket := change(rules.ApprovalSending)
	noTicket.ApprovalSystem = true
	tests := []struct {
		name   string
		change Change
		user   string
		body   string
		want   string
		// platform is the installation's ("" is GitLab).
		platform string
	}{
		{name: "retry on a validated change: the state", change: change(rules.CalledBack), user: "maint", body: "/retry",
			want: "`/retry` was not run because of the change's state: it applies to a failed change; this one is VALIDATED (CALLED_BACK)."},
		{name: "retry on a validated change by a stranger: still the state", change: change(rules.CalledBack), user: "guest", body: "/retry",
			want: "`/retry` was not run because of the change's state: it applies to a failed change; this one is VALIDATED (CALLED_BACK)."},
		{name: "cancel of a merged change: the state", change: change(rules.HandleMerged), user: "alice", body: "/cancel",
			want: "`/cancel` was not run because of the change's state: it applies to a change in progress; this one is MERGED (HANDLE_MERGED)."},
		{name: "resume by a developer: the role", change: change(rules.HandlePipelinePending), user: "dev-a", body: "/resume",
			want: "`/resume` was not run because of your role: it is for operators only."},
		{name: "retry by a stranger: the role", change: change(rules.HandleFailed), user: "guest", body: "/retry",
			want: "`/retry` was not run because of your role: it is for the change's requester, the MR author, project members with Developer access or more."},
		{name: "retry by the requester without merge rights: the access", change: change(rules.HandleFailed), user: "alice", body: "/retry",
			want: "`/retry` was not run because of your access: it leads to a merge into main, which needs access level 40 (Maintainer) or more."},
		{name: "approve when the approval system decides", change: external, user: "carol", body: "@changebot approve",
			want: "`/approve` was not run: approvals of this change come from the approval system, not from GitLab. Decide in its ticket [APR-1001](https://approvals.example.test/t/APR-1001)."},
		{name: "reject before the approval system has a ticket", change: noTicket, user: "carol", body: "/reject",
			want: "`/reject` was not run: approvals of this change come from the approval system, not from GitLab. Decide there once it has opened the change's ticket."},
		// On GitHub (issue 15): GitHub's permission names and GitHub.
		{name: "github: retry by a stranger: the role", change: change(rules.HandleFailed), user: "guest", body: "/retry", platform: "github",
			want: "`/retry` was not run because of your role: it is for the change's requester, the pull request's author, collaborators with write permission or more."},
		{name: "github: retry by the requester without merge rights: the access", change: change(rules.HandleFailed), user: "alice", body: "/retry", platform: "github",
			want: "`/retry` was not run because of your access: it leads to a merge into main, which needs maintain permission on the repository or more."},
		{name: "github: approve when the approval system decides", change: external, user: "carol", body: "@changebot approve", platform: "github",
			want: "`/approve` was not run: approvals of this change come from the approval system, not from GitHub. Decide in its ticket [APR-1001](https://approvals.example.test/t/APR-1001)."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := replyHarnessOn(t, tc.platform, tc.change, tc.user, tc.body)
			if len(f.bodies) != 1 || len(f.refused) != 1 || len(f.acted) != 0 {
				t.Fatalf("replies %q, refused %q, acted %q; want one refusal", f.bodies, f.refused, f.acted)
			}
			first, _, _ := strings.Cut(f.bodies[0], "\n")
			if first != tc.want {
				t.Errorf("refusal reads\n%s\nwant\n%s", first, tc.want)
			}
			name := strings.Fields(strings.TrimPrefix(tc.body, "@changebot "))[0]
			if n := strings.Count(first, strings.TrimPrefix(name, "/")); n != 1 {
				t.Errorf("the refusal names %s %d times, want once: %s", name, n, first)
			}
		})
	}
}
