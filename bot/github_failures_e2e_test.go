package bot

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/platform/github/githubfake"
)

// The acceptance flows of issue 15 on githubfake: each GitLab failure
// path of TestFailurePaths and its neighbours, driven through githubfake's
// faults and reaching the state the GitLab test reaches. Scenarios share
// one bot and one fake GitHub, each in a repository of its own, and run
// concurrently.

// ghEnv is one bot on githubfake, shared by concurrent scenarios.
type ghEnv struct {
	*failEnv
}

func newGitHubFailEnv(t *testing.T) *ghEnv {
	t.Helper()
	env := newGitHubTestEnv(t, true, 100*time.Millisecond)
	f := &failEnv{Env: env}
	f.app, f.sc = startBotWithPoll(t, env, failurePoll())
	return &ghEnv{failEnv: f}
}

// addRepo adds a repository with the demo accounts' permissions; spec
// fills in the rest (CI, protection).
func (g *ghEnv) addRepo(name string, spec githubfake.RepoSpec) githubfake.Repo {
	spec.FullName = "failures/" + name
	spec.Collaborators = map[string]string{demo.Robot: "maintain", demo.Requester: "write", demo.Operator: "write",
		demo.Developer: "write", demo.Reporter: "read"}
	for _, r := range demo.Reviewers {
		spec.Collaborators[r.Name] = "write"
	}
	if spec.RequiredContexts == nil {
		spec.RequiredContexts = []string{"build"}
	}
	return g.GitHub.AddRepo(spec)
}

// submitTo submits a change to repo and returns its operation id.
func (g *ghEnv) submitTo(t *testing.T, r githubfake.Repo) string {
	t.Helper()
	return g.submitChange(t, r.FullName)
}

// callsTo returns r's calls with method whose path ends in suffix.
func (g *ghEnv) callsTo(r githubfake.Repo, method, suffix string) []githubfake.Call {
	var out []githubfake.Call
	for _, c := range g.GitHub.Calls() {
		if c.Method == method && strings.HasPrefix(c.Path, "/repos/"+r.FullName+"/") && strings.HasSuffix(c.Path, suffix) {
			out = append(out, c)
		}
	}
	return out
}

// statusComment waits until the status comment of pull request #number
// shows every text.
func (g *ghEnv) statusComment(t *testing.T, r githubfake.Repo, number int64, texts ...string) {
	t.Helper()
	body, ok := pollStatusComment(patience*10*time.Second, func() []string {
		var bodies []string
		for _, c := range g.GitHub.Comments(r.ID, number) {
			bodies = append(bodies, c.Body)
		}
		return bodies
	}, texts...)
	if !ok {
		t.Fatalf("status comment does not show %q:\n%s", texts, body)
	}
}

// TestGitHubFailurePaths runs the issue 15 acceptance scenarios that share
// one bot.
func TestGitHubFailurePaths(t *testing.T) {
	t.Parallel()
	g := newGitHubFailEnv(t)
	scenarios := []scenario{
		{"failed_check_then_retry", func(t *testing.T, _ *failEnv) {
			// GitLab: TestRetryAfterFailedPipelineReachesValidated.
			r := g.addRepo("retry", githubfake.RepoSpec{CI: &githubfake.CIScript{Outcomes: []string{"failure", "success"}}})
			op := g.submitTo(t, r)
			v := g.wait(t, op, "CREATE_PIPELINE_FAILED", 30*time.Second)
			g.GitHub.AddComment(r.ID, v.MergeRequest.IID, demo.Requester, "Fixed the runner.\n/retry")
			if _, err := demo.FollowChange(context.Background(), g.Env, op, patience*40*time.Second, func(api.ChangeView) {}); err != nil {
				t.Fatal(err)
			}
			if pr, _ := g.GitHub.PullRequest(r.ID, v.MergeRequest.IID); !pr.Merged {
				t.Fatalf("pull request %+v not merged", pr)
			}
		}},
		{"merge_409_head_moved", func(t *testing.T, _ *failEnv) {
			// GitLab: merge/409_waits_for_the_head_pipeline_again.
			r := g.addRepo("merge-409", githubfake.RepoSpec{})
			g.GitHub.InjectFault(githubfake.Fault{Method: "PUT", PathPattern: "/repos/" + r.FullName + "/pulls/*/merge",
				Status: http.StatusConflict, Times: 1, Body: `{"message":"Head branch was modified. Review and try the merge again.","documentation_url":"https://docs.github.com/rest/pulls/pulls#merge-a-pull-request"}`})
			op := g.submitTo(t, r)
			g.wait(t, op, "CALLED_BACK", 30*time.Second)
			merges := g.callsTo(r, "PUT", "/merge")
			if len(merges) != 2 || merges[0].Status != http.StatusConflict || merges[1].Status != http.StatusOK {
				t.Fatalf("merge calls %+v, want a 409 then a 200", merges)
			}
		}},
		{"not_mergeable", func(t *testing.T, _ *failEnv) {
			// GitLab: merge/rule_422 (a rule the platform enforces). GitHub
			// answers 405 and mergeable_state "blocked", which it also
			// shows for a missing review: the flow approves once more
			// (merge.max_rounds 1 here), then stops, as on GitLab.
			r := g.addRepo("blocked", githubfake.RepoSpec{})
			op := g.submitTo(t, r)
			v := g.wait(t, op, "CREATE_MR_OPENED", 30*time.Second)
			g.GitHub.BlockMerge(r.ID, v.MergeRequest.IID, "Repository rule violations found: commit message must match ^CHG-")
			v = g.wait(t, op, "HANDLE_NOT_MERGEABLE", 30*time.Second)
			g.settled(t, v)
			if n := len(g.callsTo(r, "PUT", "/merge")); n != 2 {
				t.Errorf("merge calls = %d, want 2 (the first and one more round, never a loop)", n)
			}
			if pr, _ := g.GitHub.PullRequest(r.ID, v.MergeRequest.IID); pr.State != "open" || pr.Merged {
				t.Errorf("pull request %s merged=%v, want open", pr.State, pr.Merged)
			}
			g.statusComment(t, r, v.MergeRequest.IID, "HANDLE_NOT_MERGEABLE", "/retry")
			// GitHub says why only in its 405: the reason reaches the
			// change's detail, in GitHub's words (issue 15).
			wantDetail := fmt.Sprintf("GitHub still answers not_approved for #%d after 1 rounds: Repository rule violations found: commit message must match ^CHG-", v.MergeRequest.IID)
			if v.Detail != wantDetail {
				t.Errorf("detail %q, want %q", v.Detail, wantDetail)
			}
			if strings.Contains(v.Hint, "GitLab") || !strings.Contains(v.Hint, "GitHub refuses the merge") {
				t.Errorf("hint %q, want GitHub's refusal in GitHub's words", v.Hint)
			}
		}},
		{"conflict", func(t *testing.T, _ *failEnv) {
			// GitLab: merge/conflict.
			r := g.addRepo("conflict", githubfake.RepoSpec{})
			op := g.submitTo(t, r)
			v := g.wait(t, op, "CREATE_MR_OPENED", 30*time.Second)
			g.GitHub.SetConflict(r.ID, v.MergeRequest.IID, true)
			g.wait(t, op, "HANDLE_REBASE_CONFLICT", 30*time.Second)
			if n := len(g.callsTo(r, "PUT", "/merge")); n > 1 {
				t.Errorf("merge calls = %d, want at most 1", n)
			}
		}},
		{"secondary_rate_limit", func(t *testing.T, _ *failEnv) {
			// GitLab: the 429 scenarios of transientScenarios.
			r := g.addRepo("secondary", githubfake.RepoSpec{})
			g.GitHub.InjectFault(githubfake.SecondaryRateLimit("POST", "/repos/"+r.FullName+"/pulls/*/reviews", 2, "1"))
			op := g.submitTo(t, r)
			g.wait(t, op, "CALLED_BACK", 40*time.Second)
			limited, ok := 0, 0
			for _, c := range g.callsTo(r, "POST", "/reviews") {
				switch c.Status {
				case http.StatusForbidden:
					limited++
				case http.StatusOK:
					ok++
				}
			}
			if limited != 2 || ok != 2 {
				t.Fatalf("review calls: %d limited, %d approved; want 2 and 2 (one per reviewer)", limited, ok)
			}
		}},
	}
	runConcurrently(t, g.failEnv, scenarios)
}

// TestGitHubPollingFallbackWithoutWebhooks: with every GitHub webhook
// lost, stepped polling still carries the change to VALIDATED (GitLab:
// TestPollingFallbackWithoutWebhooks).
func TestGitHubPollingFallbackWithoutWebhooks(t *testing.T) {
	t.Parallel()
	g := newGitHubFailEnv(t)
	g.GitHub.SetDropWebhooks(func(string) bool { return true })
	r := g.addRepo("no-webhooks", githubfake.RepoSpec{})
	op := g.submitTo(t, r)
	v := g.wait(t, op, "CALLED_BACK", 50*time.Second)
	if n := len(g.callsTo(r, "GET", fmt.Sprintf("/pulls/%d", v.MergeRequest.IID))); n < 2 {
		t.Errorf("%d reads of the pull request: the check wait did not poll", n)
	}
}
