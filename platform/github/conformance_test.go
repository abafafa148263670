package github_test

import (
	"testing"
	"time"

	"changebot/platform"
	"changebot/platform/github"
	"changebot/platform/github/githubfake"
	"changebot/platform/platformtest"
)

const (
	robotToken     = "ghp_conformance_robot"
	reviewerTokenA = "ghp_conformance_reviewer_a"
	reviewerTokenB = "ghp_conformance_reviewer_b"
	outsiderToken  = "ghp_conformance_outsider"
)

// fakeEnv is githubfake with a robot, two reviewers, an outsider and one
// repository "acme/config" whose default branch requires the "build"
// check, and the adapter pointed at it.
type fakeEnv struct {
	srv  *githubfake.Server
	c    *github.Client
	repo githubfake.Repo
	env  *platformtest.Env
}

func newFakeEnv(t *testing.T, opts githubfake.Options, spec githubfake.RepoSpec, cfg github.Config) *fakeEnv {
	t.Helper()
	srv := githubfake.New(opts)
	t.Cleanup(srv.Close)
	robot := srv.AddUser("changebot", robotToken)
	revA := srv.AddUser("reviewer-a", reviewerTokenA)
	revB := srv.AddUser("reviewer-b", reviewerTokenB)
	outsider := srv.AddUser("outsider", outsiderToken)
	srv.AddOrgMember("acme", "changebot", "member")
	if spec.FullName == "" {
		spec.FullName = "acme/config"
	}
	if spec.Collaborators == nil {
		spec.Collaborators = map[string]string{"changebot": "maintain", "reviewer-a": "write", "reviewer-b": "write"}
	}
	repo := srv.AddRepo(spec)
	cfg.BaseURL = srv.URL()
	if cfg.Token == "" && cfg.App == nil {
		cfg.Token = robotToken
	}
	if cfg.ReviewerTokens == nil {
		cfg.ReviewerTokens = []string{reviewerTokenA, reviewerTokenB}
	}
	cfg.RetryWaitMin, cfg.RetryWaitMax = time.Millisecond, 10*time.Millisecond
	if cfg.MergeableWait == 0 {
		cfg.MergeableWait = time.Millisecond
	}
	c, err := github.New(cfg)
	if err != nil {
		t.Fatalf("github.New: %v", err)
	}
	f := &fakeEnv{srv: srv, c: c, repo: repo}
	f.env = &platformtest.Env{
		Adapter:        c,
		ProjectRef:     repo.FullName,
		ProjectID:      repo.ID,
		DefaultBranch:  repo.DefaultBranch,
		Robot:          platform.User{ID: robot.ID, Username: robot.Login},
		Reviewers:      []platform.User{{ID: revA.ID, Username: revA.Login}, {ID: revB.ID, Username: revB.Login}},
		Outsider:       platform.User{ID: outsider.ID, Username: outsider.Login},
		ReviewerAccess: platform.AccessDeveloper,
		Group:          "acme",
		GroupAccess:    platform.AccessDeveloper,
		Secrets:        []string{robotToken, reviewerTokenA, reviewerTokenB},
		WaitIdle: func(t *testing.T) {
			t.Helper()
			if err := srv.WaitIdle(t.Context()); err != nil {
				t.Fatalf("WaitIdle: %v", err)
			}
		},
		PushToTarget: func(t *testing.T, branch string) { srv.PushToBranch(repo.ID, branch, "outsider") },
		ConflictOnRebase: func(t *testing.T, iid int64) {
			srv.SetConflict(repo.ID, iid, true)
		},
		BlockMerge: func(t *testing.T, iid int64) {
			srv.BlockMerge(repo.ID, iid, "Repository rule violations found")
		},
		FailFirstPipeline: func(t *testing.T) {
			srv.SetCIScript(repo.ID, githubfake.CIScript{Outcomes: []string{"failure", "success"}})
		},
		RateLimitNotes: func(t *testing.T) {
			srv.InjectFault(githubfake.SecondaryRateLimit("POST", "/repos/*/*/issues/*/comments", 1, "30"))
		},
	}
	return f
}

// TestConformance runs the shared adapter suite against githubfake.
func TestConformance(t *testing.T) {
	t.Parallel()
	platformtest.Run(t, platformtest.Harness{Name: "github", Setup: func(t *testing.T) *platformtest.Env {
		return newFakeEnv(t, githubfake.Options{}, githubfake.RepoSpec{RequiredContexts: []string{"build"}}, github.Config{}).env
	}})
}
