package ops

import (
	"log/slog"
	"time"

	"changebot/config"
	"changebot/platform/github"
)

// GitHubConfig is the GitHub adapter's configuration from cfg, for bot's
// platform client and doctor's and setup's. waits, when
// not nil, is where the rate-limit waits of each GitHub account are shared
// by every replica (github.Config.AccountWaits; serve passes its store);
// nil keeps each wait in the call that met it (the one-shot commands).
func GitHubConfig(cfg config.Config, log *slog.Logger, observe func(endpoint string, status int, d time.Duration), waits github.AccountWaits) github.Config {
	gc := github.Config{BaseURL: cfg.GitHubURL, Token: cfg.GitHubToken, ReviewerTokens: cfg.ReviewerTokens,
		Logger: log, ObserveFunc: observe, AccountWaits: waits}
	if cfg.GitHubToken == "" {
		gc.App = &github.AppAuth{AppID: cfg.GitHubAppID, InstallationID: cfg.GitHubInstallationID,
			PrivateKeyPEM: []byte(cfg.GitHubAppPrivateKey)}
	}
	return gc
}
