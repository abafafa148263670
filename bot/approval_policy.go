package bot

import (
	"strconv"
	"strings"

	"changebot/config"
	"changebot/flows"
	"changebot/flows/rules"
	"changebot/platform"
)

// approvalPolicyFunc returns the approval mode of a project from the
// settings approval.provider (external | gitlab), approval.approvers
// (comma-separated GitLab usernames), approval.approver_groups
// (comma-separated groups), approval.min_access (GitLab access
// level, 0 = none) and approval.required (count, default 1). lookup reads a
// setting for a project. On GitHub (platformName config.PlatformGitHub), approval
// mode on the platform with no approver, group or access level named lets
// every collaborator with write permission approve (min access 30, what
// platform/github maps "write" to; issue 15 point 5).
func approvalPolicyFunc(lookup func(key, project string) string, platformName string) func(project string) flows.ApprovalPolicy {
	return func(project string) flows.ApprovalPolicy {
		p := flows.ApprovalPolicy{Provider: rules.ProviderExternal, Required: 1}
		if v := lookup("approval.provider", project); v != "" {
			p.Provider = v
		}
		for _, u := range strings.Split(lookup("approval.approvers", project), ",") {
			if u = strings.TrimPrefix(strings.TrimSpace(u), "@"); u != "" {
				p.Approvers = append(p.Approvers, u)
			}
		}
		for _, g := range strings.Split(lookup("approval.approver_groups", project), ",") {
			if g = strings.TrimSpace(g); g != "" {
				p.ApproverGroups = append(p.ApproverGroups, g)
			}
		}
		if n, err := strconv.Atoi(lookup("approval.min_access", project)); err == nil {
			p.MinAccess = n
		}
		if n, err := strconv.Atoi(lookup("approval.required", project)); err == nil && n > 0 {
			p.Required = n
		}
		if platformName == config.PlatformGitHub && p.MinAccess == 0 && len(p.Approvers) == 0 && len(p.ApproverGroups) == 0 {
			p.MinAccess = platform.AccessDeveloper
		}
		return p
	}
}
