package rules_test

import (
	"slices"
	"strings"
	"testing"

	"changebot/flows/rules"
)

// TestCommandsNow: the status comment's list of commands comes from the
// step table and the approval mode alone (issue 20 point 2), in the
// platform's words.
func TestCommandsNow(t *testing.T) {
	t.Parallel()
	names := func(docs []rules.CommandDoc) []string {
		var out []string
		for _, d := range docs {
			out = append(out, d.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		step     rules.StepCode
		awaits   bool
		platform string
		want     []string
	}{
		{"waiting for the approval system", rules.ApprovalSent, false, "gitlab", []string{"status", "cancel", "help"}},
		{"waiting for an in-GitLab approval", rules.ApprovalSent, true, "gitlab", []string{"status", "cancel", "approve", "reject", "help"}},
		{"failed", rules.HandleFailed, false, "gitlab", []string{"retry", "status", "cancel", "help"}},
		{"parked", rules.HandleRebasePending, false, "github", []string{"resume", "status", "cancel", "help"}},
		{"validated", rules.CalledBack, false, "gitlab", []string{"status", "help"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := names(rules.CommandsNow(rules.MustStep(tc.step), tc.awaits, tc.platform))
			if !slices.Equal(got, tc.want) {
				t.Errorf("commands %v, want %v", got, tc.want)
			}
		})
	}
	for _, d := range rules.CommandDocs("github") {
		if strings.Contains(d.Description+d.WhoText, "merge request") || strings.Contains(d.Description+d.WhoText, "GitLab") {
			t.Errorf("GitHub's %s speaks of GitLab: %q / %q", d.Name, d.Description, d.WhoText)
		}
	}
	if !rules.AwaitsPlatformApproval(rules.GitLabTicket, rules.StatusApprovalSent) || rules.AwaitsPlatformApproval("T-1", rules.StatusApprovalSent) ||
		rules.AwaitsPlatformApproval(rules.GitLabTicket, rules.StatusMRCreated) {
		t.Error("AwaitsPlatformApproval: only a change with the gitlab ticket waiting in APPROVAL_SENT awaits an approval on the platform")
	}
}
