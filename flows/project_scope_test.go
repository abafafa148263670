package flows_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/store"
)

// TestProjectSettingsFollowTheResolvedProject: the project's own settings
// (approval in GitLab by carol, flow order, polling) are set for its path
// as the platform shows it, flowtest.ProjectPath. A submitter naming the
// project by its numeric id or in another case still gets them: the change
// stores the path the platform answered, and every settings lookup by
// project is asked for that path only. Before, the lookups took the
// submitter's spelling, found no project value, and the change went
// through the global policy (the external approval system) into the
// project that requires carol's approval.
func TestProjectSettingsFollowTheResolvedProject(t *testing.T) {
	t.Parallel()
	for _, platformName := range []string{store.PlatformGitLab, store.PlatformGitHub} {
		for _, spelling := range []string{"id", "G/Config", flowtest.ProjectPath} {
			t.Run(platformName+"/"+spelling, func(t *testing.T) {
				t.Parallel()
				var mu sync.Mutex
				asked := map[string]bool{}
				ask := func(project string) {
					mu.Lock()
					defer mu.Unlock()
					asked[project] = true
				}
				h := flowtest.New(t, &flowtest.Opts{Configure: func(cfg *flows.EngineConfig) {
					cfg.Platform = platformName
					// A settings scope: the project's path exactly.
					cfg.ApprovalPolicyFunc = func(project string) flows.ApprovalPolicy {
						ask(project)
						if project == flowtest.ProjectPath {
							return flows.ApprovalPolicy{Provider: rules.ProviderGitLab, Approvers: []string{"carol"}, Required: 1}
						}
						return flows.ApprovalPolicy{Provider: rules.ProviderExternal, Required: 1}
					}
					cfg.PollFunc = func(project string) flows.PollConfig {
						ask(project)
						return flows.PollConfig{}
					}
				}})
				h.GitLab.AddUser("carol", "carol-token")
				p := flowtest.Change("svc")
				p.Project = spelling
				if spelling == "id" {
					p.Project = strconv.FormatInt(h.Project.ID, 10)
				}
				p.ApprovalFirstFunc = func(project string) bool {
					ask(project)
					return project != flowtest.ProjectPath // the global order: approval first
				}
				p.IdempotencyKey = "k-" + spelling
				op := h.Submit(t, p)
				if op.Project != flowtest.ProjectPath || op.ProjectID != h.Project.ID {
					t.Fatalf("stored project = %q (id %d), want %q (id %d)", op.Project, op.ProjectID, flowtest.ProjectPath, h.Project.ID)
				}
				if op.ApprovalFirst {
					t.Errorf("approval first: the project's flow order (and its GitLab approval) were not applied")
				}
				h.WorkUntilIdle(t)
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				got := h.RequireStep(t, op.ID, rules.ApprovalSent)
				if got.TicketID != rules.GitLabTicket {
					t.Errorf("ticket = %q, want %q: the global policy (external approval) was applied", got.TicketID, rules.GitLabTicket)
				}
				if n := len(h.Approvals.Requests()); n != 0 {
					t.Errorf("the external approval system got %d requests, want none", n)
				}
				mu.Lock()
				for project := range asked {
					if project != flowtest.ProjectPath {
						t.Errorf("a setting was looked up for %q, want only %q", project, flowtest.ProjectPath)
					}
				}
				mu.Unlock()
				// The same submission again, with the first spelling or
				// another, is the same change (not an idempotency conflict).
				for _, again := range []string{p.Project, strings.ToUpper(flowtest.ProjectPath), strconv.FormatInt(h.Project.ID, 10)} {
					q := p
					q.Project = again
					rep, created, err := h.Engine.Submit(context.Background(), q)
					if err != nil || created || rep.ID != op.ID {
						t.Errorf("repeat as %q: %s created=%v err=%v, want %s", again, rep.ID, created, err, op.ID)
					}
				}
			})
		}
	}
}
