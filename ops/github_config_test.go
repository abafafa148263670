package ops

import (
	"testing"

	"changebot/config"
)

// TestGitHubConfigChoosesTheRobotsCredentials: with a robot token the
// GitHub adapter authenticates with it; without one, as the GitHub App
// installation, with the ids and the private key as configured.
func TestGitHubConfigChoosesTheRobotsCredentials(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  config.Config
		app  bool
	}{
		{name: "token", cfg: config.Config{GitHubToken: "ghp-robot", ReviewerTokens: []string{"r1"}}},
		{name: "app", cfg: config.Config{GitHubAppID: 12345, GitHubInstallationID: 678, GitHubAppPrivateKey: "-----BEGIN RSA PRIVATE KEY-----\nx\n"}, app: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gc := GitHubConfig(tc.cfg, nil, nil, nil)
			switch {
			case !tc.app && (gc.App != nil || gc.Token != tc.cfg.GitHubToken || len(gc.ReviewerTokens) != 1):
				t.Errorf("token: adapter config %+v, want the robot's token and no App", gc)
			case tc.app && (gc.App == nil || gc.Token != "" || gc.App.AppID != 12345 || gc.App.InstallationID != 678 ||
				string(gc.App.PrivateKeyPEM) != tc.cfg.GitHubAppPrivateKey):
				t.Errorf("app: adapter config %+v (App %+v), want the App with its ids and key", gc, gc.App)
			}
		})
	}
}
