package bot

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
)

// TestChangePageSaysWhatItsEventCountCounts: the change's page counts and
// lists every event, the merge claims the status comment leaves out too,
// each with what it did in words.
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
	if want := fmt.Sprintf("Timeline (%d events)", len(view.Events)); !strings.Contains(body, want) {
		t.Errorf("the page lacks %q:\n%s", want, body)
	}
	if n := len(regexp.MustCompile(`<tr><td>\d+</td><td>`).FindAllString(body, -1)); n != len(view.Events) {
		t.Errorf("the page's timeline has %d rows, want every one of the %d events", n, len(view.Events))
	}
	for _, want := range []string{"approved by carol", "merged"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page's timeline does not say %q:\n%s", want, body)
		}
	}
}
