package bot

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestGitHubSubmitNamesGitHubUsernameRules: on a GitHub installation a bad
// requested_by is refused with GitHub's username rules, never GitLab's (it
// answered "must be a GitLab username ... '.git' or '.atom'"); one with
// invalid text too names GitHub.
func TestGitHubSubmitNamesGitHubUsernameRules(t *testing.T) {
	t.Parallel()
	env := newGitHubTestEnv(t, false, 100*time.Millisecond)
	startBot(t, env)
	for _, body := range []string{
		// valid on GitLab, not on GitHub
		strings.Replace(validChange("gh-rb"), `"alice"`, `"alice_smith"`, 1),
		// with invalid text: the API's own check of every field
		strings.Replace(strings.Replace(validChange("gh-rbt"), `"alice"`, `"alice.smith"`, 1), `"title":"t"`, "\"title\":\"t\xff\"", 1),
	} {
		code, answer := submitCall(t, env, "/api/v1/changes", "Bearer", demoAPIToken, "", []byte(body))
		if code != http.StatusBadRequest || !strings.Contains(answer, `"field":"requested_by"`) ||
			!strings.Contains(answer, "must be a GitHub username") || strings.Contains(answer, "GitLab") {
			t.Errorf("status %d %s, want 400 naming GitHub's username rules for requested_by", code, answer)
		}
	}
}
