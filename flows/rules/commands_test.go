package rules

import (
	"slices"
	"strings"
	"testing"
)

// TestCommandsNow: the status comment's list of commands comes from the
// step table and the approval mode alone (issue 20 point 2), in the
// platform's words.
func TestCommandsNow(t *testing.T) {
	t.Parallel()
	names := func(docs []CommandDoc) []string {
		var out []string
		for _, d := range docs {
			out = append(out, d.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		step     StepCode
		awaits   bool
		platform string
		want     []string
	}{
		{"waiting for the approval system", ApprovalSent, false, "gitlab", []string{"status", "cancel", "help"}},
		{"waiting for an in-GitLab approval", ApprovalSent, true, "gitlab", []string{"status", "cancel", "approve", "reject", "help"}},
		{"failed", HandleFailed, false, "gitlab", []string{"retry", "status", "cancel", "help"}},
		{"parked", HandleRebasePending, false, "github", []string{"resume", "status", "cancel", "help"}},
		{"validated", CalledBack, false, "gitlab", []string{"status", "help"}},
		{"waiting in the merge queue", HandleQueued, false, "gitlab", []string{"resume", "status", "cancel", "freeze", "unfreeze", "help"}},
		{"at the head of the merge queue", HandleApproved, false, "github", []string{"resume", "status", "cancel", "help"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := names(CommandsNow(MustStep(tc.step), tc.awaits, tc.platform))
			if !slices.Equal(got, tc.want) {
				t.Errorf("commands %v, want %v", got, tc.want)
			}
		})
	}
	for _, d := range CommandDocs("github") {
		if strings.Contains(d.Description+d.WhoText, "merge request") || strings.Contains(d.Description+d.WhoText, "GitLab") {
			t.Errorf("GitHub's %s speaks of GitLab: %q / %q", d.Name, d.Description, d.WhoText)
		}
	}
	for _, name := range []string{CommandFreeze, CommandUnfreeze} {
		if !QueueCommand(name) || !CommandApplies(name, MustStep(CalledBack), false) || !CommandApplies(name, MustStep(ApprovalSent), false) {
			t.Errorf("/%s acts on the branch's queue: it applies to a change in any state", name)
		}
	}
	if QueueCommand(CommandCancel) {
		t.Error("/cancel acts on the change, not on its queue")
	}
	if !AwaitsPlatformApproval(GitLabTicket, StatusApprovalSent) || AwaitsPlatformApproval("T-1", StatusApprovalSent) ||
		AwaitsPlatformApproval(GitLabTicket, StatusMRCreated) {
		t.Error("AwaitsPlatformApproval: only a change with the gitlab ticket waiting in APPROVAL_SENT awaits an approval on the platform")
	}
}
