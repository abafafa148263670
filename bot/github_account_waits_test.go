package bot

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"changebot/config"
	"changebot/platform"
	"changebot/platform/github/githubfake"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// TestGitHubRateLimitWaitSharedByReplicas: serve's GitHub adapter keeps a
// rate limit's wait in the database (githubConfig with the store as
// AccountWaits), so after GitHub's secondary rate limit answered one
// replica, another replica of the same installation does not call GitHub
// with that account until the wait is over, as the GitLab adapter does
// with a 429 (issue 10 point 4; GitHub may ban an integration that keeps
// calling while limited).
func TestGitHubRateLimitWaitSharedByReplicas(t *testing.T) {
	t.Parallel()
	sc := pgtest.New(t)
	st, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	gh := githubfake.New(githubfake.Options{})
	t.Cleanup(gh.Close)
	gh.AddUser("changebot", "ghp-robot")
	repo := gh.AddRepo(githubfake.RepoSpec{FullName: "acme/config"})
	replica := func() platformClient {
		a := &App{cfg: config.Config{Platform: config.PlatformGitHub, GitHubURL: gh.URL(), GitHubToken: "ghp-robot"},
			log: slog.New(slog.DiscardHandler), store: st}
		c, err := a.newPlatformClient(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := replica(), replica()
	gh.InjectFault(githubfake.SecondaryRateLimit("GET", "/repositories/*", 1, "60"))
	if _, err := a.Branch(t.Context(), repo.ID, "main"); !errors.Is(err, platform.ErrRateLimited) {
		t.Fatalf("replica a: %v; want GitHub's secondary rate limit", err)
	}
	sent := len(gh.Calls())
	_, err = b.Branch(t.Context(), repo.ID, "main")
	if !errors.Is(err, platform.ErrRateLimited) || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("replica b during replica a's wait: %v; want held back without a call", err)
	}
	if wait := platform.RetryAfterOf(err); wait <= 50*time.Second || wait > 60*time.Second {
		t.Errorf("replica b's wait %s; want the rest of GitHub's 60 s", wait)
	}
	if n := len(gh.Calls()) - sent; n != 0 {
		t.Errorf("replica b sent %d requests during the wait; want none", n)
	}
}
