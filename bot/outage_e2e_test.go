package bot

import (
	"context"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// TestGitLabOutageIsVisibleAndRecoversQuickly: while GitLab answers 500 the
// change shows that it is retrying and why; once GitLab recovers the change
// goes on within seconds (capped backoff) and reaches VALIDATED.
func TestGitLabOutageIsVisibleAndRecoversQuickly(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	app, _ := startBot(t, env)
	ctx := context.Background()
	opID, err := demo.SubmitChange(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	// After the submission's own GitLab checks (an outage then answers 503
	// and creates nothing), before the create step (after approval): its
	// first call is the commit that creates the branch (it shares the
	// submit check's read of the project when that is under a minute old),
	// or the project read.
	env.GitLab.InjectFault(gitlabfake.Fault{Method: "GET", PathPattern: "/api/v4/projects/*", Status: 500})
	env.GitLab.InjectFault(gitlabfake.Fault{Method: "POST", PathPattern: "/api/v4/projects/*/repository/commits", Status: 500})
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := demo.GetChange(ctx, env, opID)
		if err == nil && strings.Contains(v.Detail, "retrying") && strings.Contains(v.Detail, "500") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outage never showed on the change: %+v", v)
		}
		time.Sleep(100 * time.Millisecond)
	}
	env.GitLab.ClearFaults()
	recovered := time.Now()
	v, err := demo.FollowChange(ctx, env, opID, 60*time.Second, func(api.ChangeView) {})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(recovered); took > 30*time.Second {
		t.Errorf("took %s after GitLab recovered", took)
	}
	if v.Detail != "" {
		t.Errorf("VALIDATED change still shows detail %q", v.Detail)
	}
	attempts := 0
	for _, ev := range eventsOf(t, app, opID) {
		if ev.Type == store.EventAttempt {
			attempts++
		}
	}
	if attempts == 0 {
		t.Error("no attempt event recorded the outage")
	}
}
