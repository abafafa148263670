package gitlab_test

import (
	"testing"

	"changebot/platform"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/platform/platformtest"
)

// TestPlatformConformance runs the shared adapter suite (package
// platformtest) against gitlabfake; the GitLab-specific statuses,
// messages and call budgets stay in conformance_test.go.
func TestPlatformConformance(t *testing.T) {
	t.Parallel()
	platformtest.Run(t, platformtest.Harness{Name: "gitlab", Setup: func(t *testing.T) *platformtest.Env {
		f := setup(t)
		srv, pid := f.srv, f.project.ID
		outsider := srv.AddUser("outsider", "outsider-token")
		srv.AddGroup("group", map[string]int{"changebot": gitlabfake.AccessMaintainer})
		return &platformtest.Env{
			Adapter:        f.c,
			ProjectRef:     "group/config",
			ProjectID:      pid,
			DefaultBranch:  "main",
			Robot:          platform.User{ID: f.robot.ID, Username: f.robot.Username},
			Reviewers:      []platform.User{{ID: f.revA.ID, Username: f.revA.Username}, {ID: f.revB.ID, Username: f.revB.Username}},
			Outsider:       platform.User{ID: outsider.ID, Username: outsider.Username},
			ReviewerAccess: platform.AccessDeveloper,
			Group:          "group",
			GroupAccess:    platform.AccessMaintainer,
			Secrets:        []string{robotToken, reviewerTokenA, reviewerTokenB},
			WaitIdle:       f.waitIdle,
			PushToTarget:   func(t *testing.T, branch string) { srv.PushToTarget(pid, branch) },
			ConflictOnRebase: func(t *testing.T, iid int64) {
				srv.SetRebaseBehavior(pid, iid, gitlabfake.RebaseBehavior{Conflict: true})
			},
			BlockMerge: func(t *testing.T, iid int64) {
				srv.SetMergeBlock(pid, iid, gitlabfake.MergeBlock{DetailedMergeStatus: "requested_changes"})
			},
			FailFirstPipeline: func(t *testing.T) {
				srv.SetPipelineScript(pid, gitlabfake.PipelineScript{MR: []string{"failed", "success"}})
			},
			RateLimitNotes: func(t *testing.T) {
				srv.InjectFault(gitlabfake.Fault{Method: "POST", PathPattern: "/api/v4/projects/*/merge_requests/*/notes", Status: 429, RetryAfter: "30", Times: 1})
			},
		}
	}})
}
