package bot

import (
	"strings"
	"testing"
	"time"

	"changebot/demo"
	"changebot/platform/github/githubfake"
	"changebot/platform/gitlab/gitlabfake"
)

// allowOverride lets every project's .changebot.yml set queue.mode, so
// that the file governs something and is checked.
func allowOverride(env *demo.Env) {
	if env.Config.Settings == nil {
		env.Config.Settings = map[string]string{}
	}
	env.Config.Settings["policy.allow_override"] = "queue.mode"
}

// policyComments are the robot's validation comments of .changebot.yml on
// merge request iid.
func policyComments(env *demo.Env, iid int64) []string {
	snap, _ := env.GitLab.MergeRequest(env.Project.ID, iid)
	var out []string
	for _, n := range snap.Notes {
		if strings.Contains(n.Body, "<!-- changebot:policy-check -->") {
			out = append(out, n.Body)
		}
	}
	return out
}

// waitPolicyComment waits, 30 s at most, for the one validation comment
// on !iid to contain want.
func waitPolicyComment(t *testing.T, env *demo.Env, iid int64, want string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := policyComments(env, iid)
		if len(got) > 1 {
			t.Fatalf("%d validation comments on !%d, want one:\n%s", len(got), iid, strings.Join(got, "\n---\n"))
		}
		if len(got) == 1 && strings.Contains(got[0], want) {
			return got[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no validation comment saying %q on !%d; have %q", want, iid, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPolicyFileCheckedOnMergeRequest is issue 25's acceptance on GitLab:
// in a project whose file governs something, a developer's merge request that changes .changebot.yml into an invalid
// file gets one comment naming the key and the line; the developer's push
// that fixes it turns the same comment into "valid"; a merge request that
// does not touch the file gets no comment.
func TestPolicyFileCheckedOnMergeRequest(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 200*time.Millisecond)
	allowOverride(env)
	env.GitLab.AddMember(env.Project.ID, "dana", gitlabfake.AccessDeveloper)
	startBotWithOpts(t, env, demo.Poll, &AppOpts{})

	bad := "version: 1\nqueue:\n  mode: always\n"
	iid := env.GitLab.OpenMRAsUser(gitlabfake.DeveloperMR{ProjectID: env.Project.ID, Username: "dana",
		SourceBranch: "dana/policy", TargetBranch: env.Project.DefaultBranch, Title: "Queue always",
		Files: map[string]string{".changebot.yml": bad}})
	other := env.GitLab.OpenMRAsUser(gitlabfake.DeveloperMR{ProjectID: env.Project.ID, Username: "dana",
		SourceBranch: "dana/other", TargetBranch: env.Project.DefaultBranch, Title: "Another file",
		Files: map[string]string{"services/x/prod.yaml": "replicas: 2\n"}})
	body := waitPolicyComment(t, env, iid, "is not valid")
	if !strings.Contains(body, "line 3 `queue.mode`") || !strings.Contains(body, "always") {
		t.Errorf("the comment does not name the key, the line and the value:\n%s", body)
	}
	if env.GitLab.Push(env.Project.ID, "dana/policy", "dana", "Fix the mode", map[string]string{".changebot.yml": "version: 1\nqueue:\n  mode: \"on\"\n"}) == "" {
		t.Fatal("pushing the fix failed")
	}
	waitPolicyComment(t, env, iid, "is valid")
	if got := policyComments(env, other); len(got) != 0 {
		t.Errorf("a merge request that does not change .changebot.yml got %q", got)
	}
}

// TestPolicyFileCheckedOnPullRequest is the same acceptance on GitHub: one
// comment on the pull request, naming the key and the line.
func TestPolicyFileCheckedOnPullRequest(t *testing.T) {
	t.Parallel()
	env := newGitHubTestEnv(t, true, 200*time.Millisecond)
	allowOverride(env)
	startBotWithOpts(t, env, demo.Poll, &AppOpts{})
	n := env.GitHub.OpenPullAsUser(githubfake.DeveloperPull{RepoID: env.Repo.ID, Login: demo.Developer, Head: "dev/policy",
		Base: env.Repo.DefaultBranch, Title: "A bad policy",
		Files: map[string]string{".changebot.yml": "version: 1\nmerge:\n  max_rounds: 0\n"}})
	if n == 0 {
		t.Fatal("the fake GitHub opened no pull request")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var found []string
		for _, c := range env.GitHub.Comments(env.Repo.ID, n) {
			if strings.Contains(c.Body, "<!-- changebot:policy-check -->") {
				found = append(found, c.Body)
			}
		}
		if len(found) > 1 {
			t.Fatalf("%d validation comments, want one", len(found))
		}
		if len(found) == 1 {
			if !strings.Contains(found[0], "is not valid") || !strings.Contains(found[0], "line 3 `merge.max_rounds`") {
				t.Fatalf("the comment does not name the key and line:\n%s", found[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no validation comment on the pull request")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPolicyFileNotCheckedWhereItGovernsNothing: without allowed keys or
// adoption the file governs nothing, so a merge request changing it is not
// read nor commented on.
func TestPolicyFileNotCheckedWhereItGovernsNothing(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 200*time.Millisecond)
	env.GitLab.AddMember(env.Project.ID, "dana", gitlabfake.AccessDeveloper)
	startBotWithOpts(t, env, demo.Poll, &AppOpts{})
	iid := env.GitLab.OpenMRAsUser(gitlabfake.DeveloperMR{ProjectID: env.Project.ID, Username: "dana",
		SourceBranch: "dana/policy", TargetBranch: env.Project.DefaultBranch, Title: "Queue always",
		Files: map[string]string{".changebot.yml": "version: 1\nqueue:\n  mode: always\n"}})
	time.Sleep(time.Second) // what the checked case needs to comment
	if got := policyComments(env, iid); len(got) != 0 {
		t.Errorf("got %q, want no comment", got)
	}
	if n := env.GitLab.CallCount("GET", "/api/v4/projects/*/merge_requests/*/diffs"); n != 0 {
		t.Errorf("%d reads of the changed paths, want none", n)
	}
}
