package bot

import (
	"io"
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
	env.Config.APITokens = append(env.Config.APITokens, APIToken{Role: RoleViewer, Token: demoViewerToken})
	startBot(t, env)
	req, _ := http.NewRequest(http.MethodGet, env.BaseURL+"/ui/changes/op_DOESNOTEXIST", nil)
	req.AddCookie(&http.Cookie{Name: webSessionCookie, Value: sessionValue(demoViewerToken)})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status %d, want 404", resp.StatusCode)
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
