package bot

import (
	"context"
	"strings"
	"testing"

	"changebot/platform/github/githubfake"
)

// TestDoctorOnGitHub: on GitHub, doctor checks the robot's token, each
// reviewer account and, per repository, that the robot and the reviewers
// have write permission; a reviewer with read only is a FAIL naming the
// fix, and the webhook, which it does not read on GitHub, a WARN saying
// what to check.
func TestDoctorOnGitHub(t *testing.T) {
	t.Parallel()
	env := newGitHubTestEnv(t, true, 0)
	collaborators := map[string]string{demoRobot: "write", demoReviewers[0].name: "write", demoReviewers[1].name: "read"}
	env.GitHub.AddRepo(githubfake.RepoSpec{FullName: "platform/app", Collaborators: collaborators})
	_, sc := startBot(t, env)
	checks := RunDoctor(context.Background(), env.Config, &DoctorOpts{Projects: []string{demoProject, "platform/app", "platform/missing"}, Schema: sc.Name})
	t.Logf("doctor:\n%s", lines(checks))
	wantFails := []string{
		"reviewer reviewer-2 may not approve in platform/app: its permission is read",
		"repository platform/missing: not found",
	}
	fails := levels(checks, CheckFail)
	if len(fails) != len(wantFails) {
		t.Fatalf("%d FAILs, want %d:\n%s", len(fails), len(wantFails), lines(checks))
	}
	for i, w := range wantFails {
		if !strings.HasPrefix(fails[i].What, w) || fails[i].Fix == "" {
			t.Errorf("FAIL %d = %q (fix %q), want it to start %q with a fix", i+1, fails[i].What, fails[i].Fix, w)
		}
	}
	for _, w := range []string{"robot token: user changebot", "reviewer token 1 (user reviewer-1): answers",
		"robot changebot may push and merge in platform/config (maintain)", "reviewers reviewer-1, reviewer-2 may approve in platform/config",
		"robot changebot may push and merge in platform/app (write)"} {
		if !strings.Contains(lines(levels(checks, CheckOK)), w) {
			t.Errorf("no OK line says %q", w)
		}
	}
	warns := lines(levels(checks, CheckWarn))
	if !strings.Contains(warns, "webhook of platform/config: not checked on GitHub") || !strings.Contains(warns, env.Config.ExternalURL+"/webhooks/github") {
		t.Errorf("no WARN names the webhook to check by hand:\n%s", warns)
	}
}
