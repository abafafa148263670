package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RepoPolicy is the last valid repository policy file (.changebot.yml) of
// one target branch of one project (issue 25 point 2; table
// repo_policies): the file as it was read, the commit it was read at and
// when. The store keeps the file's text, never its meaning: package
// repoconfig parses it.
type RepoPolicy struct {
	// Platform is PlatformGitLab or PlatformGitHub.
	Platform string
	// ProjectID is the platform's project (repository) id.
	ProjectID int64
	// Branch is the target branch the file was read from.
	Branch string
	// SHA is the commit of Branch the file was read at.
	SHA string
	// Body is the file's text (at most repoconfig's size limit).
	Body string
	// ReadAt is when the file was read (UTC, the store's precision).
	ReadAt time.Time
}

// RepoPolicyQueries are the statements of the last valid policies.
type RepoPolicyQueries interface {
	// RepoPolicySave writes p unless a policy read later than p.ReadAt is
	// stored for its branch, and reports whether it wrote.
	RepoPolicySave(ctx context.Context, p RepoPolicy) (bool, error)
	// RepoPolicyGet reads the policy of (platform, projectID, branch);
	// ErrNotFound.
	RepoPolicyGet(ctx context.Context, platform string, projectID int64, branch string) (RepoPolicy, error)
}

// RepoPolicies are the last valid repository policy files (issue 25
// point 2).
type RepoPolicies interface {
	SaveRepoPolicy(ctx context.Context, db DBTX, p RepoPolicy) (bool, error)
	RepoPolicy(ctx context.Context, db DBTX, platform string, projectID int64, branch string) (RepoPolicy, error)
}

// errRepoPolicy refuses a policy that names no branch or commit.
var errRepoPolicy = errors.New("a repository policy needs a platform, a project id, a branch and a commit sha")

// SaveRepoPolicy stores p as the last valid policy of its branch (p.ReadAt
// zero: the store's clock) and reports whether it did: a policy read
// before the one stored (a slower replica's read of an older commit) is
// not written, so the newest read wins whatever order the writes come in.
func (s *DriverStore) SaveRepoPolicy(ctx context.Context, db DBTX, p RepoPolicy) (bool, error) {
	if p.ProjectID == 0 || p.Branch == "" || p.SHA == "" {
		return false, errRepoPolicy
	}
	if p.Platform == "" {
		p.Platform = PlatformGitLab
	}
	if p.ReadAt.IsZero() {
		p.ReadAt = s.Now()
	}
	p.ReadAt = p.ReadAt.UTC().Truncate(time.Microsecond)
	x, err := s.d.Executor(db)
	if err != nil {
		return false, err
	}
	wrote, err := x.RepoPolicySave(ctx, p)
	if err != nil {
		return false, fmt.Errorf("saving the policy of project %d branch %q at %s: %w", p.ProjectID, p.Branch, p.SHA, err)
	}
	return wrote, nil
}

// RepoPolicy reads the last valid policy of (platform, projectID, branch);
// ErrNotFound when none was ever stored.
func (s *DriverStore) RepoPolicy(ctx context.Context, db DBTX, platform string, projectID int64, branch string) (RepoPolicy, error) {
	if platform == "" {
		platform = PlatformGitLab
	}
	x, err := s.d.Executor(db)
	if err != nil {
		return RepoPolicy{}, err
	}
	p, err := x.RepoPolicyGet(ctx, platform, projectID, branch)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return RepoPolicy{}, fmt.Errorf("reading the policy of project %d branch %q: %w", projectID, branch, err)
	}
	return p, err
}
