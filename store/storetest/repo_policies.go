package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"changebot/store"
)

// testRepoPolicies (issue 25 point 2): the last valid policy of a branch
// is one row per (platform, project, branch); a newer read replaces it, an
// older read (a slower replica) never does; branches, projects and
// platforms do not meet; an unknown branch is ErrNotFound; a policy that
// names no commit is refused.
func testRepoPolicies(t *testing.T, open Open) {
	ctx := context.Background()
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	s := open(t)(Opts{NowFunc: func() time.Time { return now }})

	if _, err := s.RepoPolicy(ctx, s.DB(), store.PlatformGitLab, 7, "main"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown branch: %v, want ErrNotFound", err)
	}
	save := func(p store.RepoPolicy) bool {
		t.Helper()
		wrote, err := s.SaveRepoPolicy(ctx, s.DB(), p)
		if err != nil {
			t.Fatalf("saving %+v: %v", p, err)
		}
		return wrote
	}
	first := store.RepoPolicy{Platform: store.PlatformGitLab, ProjectID: 7, Branch: "main", SHA: "aaa", Body: "version: 1\n"}
	if !save(first) {
		t.Fatal("the first policy was not written")
	}
	got, err := s.RepoPolicy(ctx, s.DB(), store.PlatformGitLab, 7, "main")
	if err != nil || got.SHA != "aaa" || got.Body != "version: 1\n" || !got.ReadAt.Equal(now) {
		t.Fatalf("read back %+v, %v; want sha aaa read at the store clock %v", got, err, now)
	}
	newer := first
	newer.SHA, newer.Body, newer.ReadAt = "bbb", "version: 1\npaths: []\n", now.Add(time.Minute)
	if !save(newer) {
		t.Fatal("a newer read was not written")
	}
	older := first
	older.SHA, older.ReadAt = "old", now.Add(30*time.Second)
	if save(older) {
		t.Fatal("a read older than the stored one replaced it")
	}
	if got, _ := s.RepoPolicy(ctx, s.DB(), store.PlatformGitLab, 7, "main"); got.SHA != "bbb" {
		t.Fatalf("after an older write the policy is at %q, want bbb", got.SHA)
	}
	other := first
	other.Branch, other.SHA = "release", "ccc"
	save(other)
	gh := first
	gh.Platform, gh.SHA = store.PlatformGitHub, "ddd"
	save(gh)
	for _, c := range []struct {
		platform string
		branch   string
		want     string
	}{{store.PlatformGitLab, "main", "bbb"}, {store.PlatformGitLab, "release", "ccc"}, {store.PlatformGitHub, "main", "ddd"}} {
		if got, err := s.RepoPolicy(ctx, s.DB(), c.platform, 7, c.branch); err != nil || got.SHA != c.want {
			t.Errorf("%s %s: %+v, %v; want sha %s", c.platform, c.branch, got, err, c.want)
		}
	}
	if _, err := s.SaveRepoPolicy(ctx, s.DB(), store.RepoPolicy{ProjectID: 7, Branch: "main"}); err == nil {
		t.Error("a policy without a commit sha was stored")
	}
}
