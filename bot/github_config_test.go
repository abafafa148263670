package bot

import (
	"slices"
	"strings"
	"testing"
)

// TestLoadConfigGitHub: CHANGEBOT_PLATFORM=github needs no GitLab URL or
// token but exactly one of the robot's GitHub token and the three GitHub
// App settings (the key read from its _FILE); every problem is named and
// none quotes a secret.
func TestLoadConfigGitHub(t *testing.T) {
	t.Parallel()
	const key = "-----BEGIN RSA PRIVATE KEY-----\nsecret-app-key\n-----END RSA PRIVATE KEY-----"
	github := func(kv ...string) map[string]string {
		env := without(validEnv(), "CHANGEBOT_GITLAB_URL", "CHANGEBOT_GITLAB_TOKEN")
		return with(with(env, "CHANGEBOT_PLATFORM", "github"), kv...)
	}
	tests := []struct {
		name  string
		env   map[string]string
		want  []string // problem prefixes, in order; nil: valid
		check func(t *testing.T, c Config)
	}{
		{name: "token", env: github("CHANGEBOT_GITHUB_TOKEN", "ghp-robot-secret"),
			check: func(t *testing.T, c Config) {
				if c.Platform != PlatformGitHub || c.GitHubToken != "ghp-robot-secret" || c.GitHubURL != "" {
					t.Errorf("config %v", c)
				}
			}},
		{name: "app with the key from a file", env: github("CHANGEBOT_GITHUB_APP_ID", "12345",
			"CHANGEBOT_GITHUB_INSTALLATION_ID", "678", "CHANGEBOT_GITHUB_APP_PRIVATE_KEY_FILE", "/run/secrets/app.pem",
			"CHANGEBOT_GITHUB_URL", "https://ghe.example/api/v3/"),
			check: func(t *testing.T, c Config) {
				if c.GitHubAppID != 12345 || c.GitHubInstallationID != 678 || c.GitHubAppPrivateKey != key ||
					c.GitHubURL != "https://ghe.example/api/v3" {
					t.Errorf("config %v", c)
				}
				if gc := githubConfig(c, nil, nil, nil); gc.App == nil || gc.Token != "" || string(gc.App.PrivateKeyPEM) != key {
					t.Errorf("the adapter is not configured as the App: %+v", gc.App)
				}
			}},
		{name: "neither", env: github(), want: []string{"CHANGEBOT_GITHUB_TOKEN (github_token): is required on GitHub"}},
		{name: "both", env: github("CHANGEBOT_GITHUB_TOKEN", "ghp-robot-secret", "CHANGEBOT_GITHUB_APP_ID", "1"),
			want: []string{"CHANGEBOT_GITHUB_TOKEN (github_token): give either the token or the GitHub App settings"}},
		{name: "app incomplete", env: github("CHANGEBOT_GITHUB_APP_ID", "1"), want: []string{
			"CHANGEBOT_GITHUB_APP_PRIVATE_KEY (github_app_private_key): is required with the other GitHub App settings",
			"CHANGEBOT_GITHUB_INSTALLATION_ID (github_installation_id): is required with the other GitHub App settings"}},
		{name: "bad app id", env: github("CHANGEBOT_GITHUB_TOKEN", "ghp-robot-secret", "CHANGEBOT_GITHUB_APP_ID", "-3"),
			want: []string{`CHANGEBOT_GITHUB_APP_ID: "-3" is not a positive number`}},
		{name: "reviewer is the robot", env: github("CHANGEBOT_GITHUB_TOKEN", secretReviewer1),
			want: []string{"CHANGEBOT_REVIEWER_TOKENS (reviewer_tokens): entry 1 is the robot's own CHANGEBOT_GITHUB_TOKEN"}},
		{name: "webhook secret still required", env: without(github("CHANGEBOT_GITHUB_TOKEN", "ghp-robot-secret"), "CHANGEBOT_WEBHOOK_SECRETS"),
			want: []string{"CHANGEBOT_WEBHOOK_SECRETS (webhook_secrets): at least one is required"}},
		{name: "unknown platform", env: with(validEnv(), "CHANGEBOT_PLATFORM", "bitbucket"),
			want: []string{`CHANGEBOT_PLATFORM (platform): "bitbucket" is not gitlab or github`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, "", tc.env, map[string]string{"/run/secrets/app.pem": key + "\n"})
			got := problemsOf(t, err)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %d = %q, want prefix %q", i+1, got[i], w)
				}
			}
			for _, p := range got {
				if strings.Contains(p, "ghp-robot-secret") || strings.Contains(p, "secret-app-key") || slices.ContainsFunc(allSecrets, func(s string) bool { return strings.Contains(p, s) }) {
					t.Errorf("problem quotes a secret: %q", p)
				}
			}
			if s := c.String(); strings.Contains(s, "ghp-robot-secret") || strings.Contains(s, "secret-app-key") {
				t.Errorf("String() shows a secret: %s", s)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}
