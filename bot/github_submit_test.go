package bot

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/demo"
	"changebot/platform/github/githubfake"
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
		code, answer := submitCall(t, env, "/api/v1/changes", "Bearer", demo.APIToken, "", []byte(body))
		if code != http.StatusBadRequest || !strings.Contains(answer, `"field":"requested_by"`) ||
			!strings.Contains(answer, "must be a GitHub username") || strings.Contains(answer, "GitLab") {
			t.Errorf("status %d %s, want 400 naming GitHub's username rules for requested_by", code, answer)
		}
	}
}

// TestGitHubSubmitErrorsNameGitHub: on a GitHub installation a project
// that is not "owner/name" or a numeric id is refused 400 naming the
// field (it answered 503 "GitLab could not answer the checks"), and the
// answers of the checks against GitHub name GitHub, never GitLab.
func TestGitHubSubmitErrorsNameGitHub(t *testing.T) {
	t.Parallel()
	env := newGitHubTestEnv(t, false, 100*time.Millisecond)
	startBot(t, env)
	tests := []struct {
		name  string
		fault *githubfake.Fault
		body  string
		code  int
		want  []string
	}{
		{name: "project without owner", body: strings.Replace(validChange("gh-p1"), `"project":"`+demo.Project+`"`, `"project":"config"`, 1),
			code: http.StatusBadRequest, want: []string{`"field":"project"`, `\"owner/name\" or a numeric id`}},
		{name: "unknown repository", body: strings.Replace(validChange("gh-p2"), `"project":"`+demo.Project+`"`, `"project":"nobody/nothing"`, 1),
			code: http.StatusUnprocessableEntity, want: []string{`"field":"project"`, "does not fit the project in GitHub"}},
		{name: "GitHub unavailable", fault: &githubfake.Fault{Method: http.MethodGet, PathPattern: "/repos/*/*", Status: 503},
			body: validChange("gh-p3"), code: http.StatusServiceUnavailable, want: []string{"GitHub could not answer the checks"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fault != nil {
				env.GitHub.InjectFault(*tc.fault)
				defer env.GitHub.ClearFaults()
			}
			code, answer := submitCall(t, env, "/api/v1/changes", "Bearer", demo.APIToken, "", []byte(tc.body))
			if code != tc.code {
				t.Fatalf("status %d %s, want %d", code, answer, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(answer, w) {
					t.Errorf("answer %s does not say %q", answer, w)
				}
			}
			if strings.Contains(answer, "GitLab") {
				t.Errorf("answer %s speaks of GitLab on a GitHub installation", answer)
			}
		})
	}
}
