package bot

import (
	"strconv"
	"strings"

	"changebot/flows"
)

// approvalPolicyFunc returns the approval mode of a project from the
// settings approval.provider (external | gitlab), approval.approvers
// (comma-separated GitLab usernames), approval.approver_groups
// (comma-separated groups), approval.min_access (GitLab access
// level, 0 = none) and approval.required (count, default 1). lookup reads a
// setting for a project.
func approvalPolicyFunc(lookup func(key, project string) string) func(project string) flows.ApprovalPolicy {
	return func(project string) flows.ApprovalPolicy {
		p := flows.ApprovalPolicy{Provider: flows.ProviderExternal, Required: 1}
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
		return p
	}
}
