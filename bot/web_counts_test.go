package bot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
)

// TestChangePageSaysWhatItsEventCountCounts: the change's page counts every
// event, the status comment only those that are steps; the page names how
// many of its events the comment leaves out (retried calls, merge claims),
// so the two counts do not differ without a word. A merged change has at
// least the merge's claim.
func TestChangePageSaysWhatItsEventCountCounts(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 200*time.Millisecond)
	startBot(t, env)
	ctx := context.Background()
	opID, err := demo.SubmitChange(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	view, err := demo.FollowChange(ctx, env, opID, 60*time.Second, func(api.ChangeView) {})
	if err != nil {
		t.Fatal(err)
	}
	hidden := 0
	for _, e := range view.Events {
		if e.Type == "attempt" || e.Type == "claim" {
			hidden++
		}
	}
	if hidden == 0 {
		t.Fatal("the validated change has no claim event; the test needs one")
	}
	_, body := viewerPage(t, env, "/ui/changes/"+opID)
	want := fmt.Sprintf("Timeline (%d events; the status comment's timeline leaves out %d of them: retried calls and merge claims)", len(view.Events), hidden)
	if !strings.Contains(body, want) {
		t.Errorf("the page lacks %q:\n%s", want, body)
	}
}
