package bot

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestChangePageOfUnknownID: the page of an id no change has answers 404
// with a page that says so, not an empty change page (no state, no
// commands, no timeline).
func TestChangePageOfUnknownID(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 200*time.Millisecond)
	startBot(t, env)
	code, body := viewerPage(t, env, "/ui/changes/op_DOESNOTEXIST")
	if code != http.StatusNotFound {
		t.Errorf("status %d, want 404", code)
	}
	if !strings.Contains(body, "No change has the id <code>op_DOESNOTEXIST</code>") {
		t.Errorf("the page does not say no change has the id:\n%s", body)
	}
	for _, empty := range []string{`id="state"`, "Commands that apply now", `id="timeline"`} {
		if strings.Contains(body, empty) {
			t.Errorf("the page of an unknown id shows an empty change (%s):\n%s", empty, body)
		}
	}
}
