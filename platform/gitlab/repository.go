package gitlab

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go"

	"changebot/platform"
)

// Branch reads a branch (GET /projects/:id/repository/branches/:branch,
// doc/api/branches.md; fixture api-branch-create.json). A missing branch
// matches platform.ErrNotFound.
func (c *Client) Branch(ctx context.Context, projectID int64, name string) (platform.Branch, error) {
	b, err := call(ctx, c, epBranchGet, func(o gl.RequestOptionFunc) (*gl.Branch, *gl.Response, error) {
		return c.robot.Branches.GetBranch(projectID, name, o)
	})
	if err != nil {
		return platform.Branch{}, fmt.Errorf("reading branch %q of project %d: %w", name, projectID, err)
	}
	return toBranch(b), nil
}

// DeleteBranch deletes branch name (DELETE
// /projects/:id/repository/branches/:branch, 204; doc/api/branches.md
// "Delete repository branch"). A missing branch matches platform.ErrNotFound;
// a protected one platform.ErrForbidden.
func (c *Client) DeleteBranch(ctx context.Context, projectID int64, name string) error {
	_, err := call(ctx, c, epBranchDelete, func(o gl.RequestOptionFunc) (struct{}, *gl.Response, error) {
		resp, err := c.robot.Branches.DeleteBranch(projectID, name, o)
		return struct{}{}, resp, err
	})
	if err != nil {
		return fmt.Errorf("deleting branch %q of project %d: %w", name, projectID, err)
	}
	return nil
}

// CreateBranch creates branch name at ref, a branch name or a commit sha
// (POST /projects/:id/repository/branches, 201; fixture
// api-branch-create.json). GitLab answers 400 "Branch already exists" when it
// exists (GITLAB-FACTS.md §2.1): callers that must be idempotent read the
// branch first.
func (c *Client) CreateBranch(ctx context.Context, projectID int64, name, ref string) (platform.Branch, error) {
	b, err := call(ctx, c, epBranchCreate, func(o gl.RequestOptionFunc) (*gl.Branch, *gl.Response, error) {
		return c.robot.Branches.CreateBranch(projectID, &gl.CreateBranchOptions{Branch: &name, Ref: &ref}, o)
	})
	if err != nil {
		return platform.Branch{}, fmt.Errorf("creating branch %q from %q in project %d: %w", name, ref, projectID, err)
	}
	return toBranch(b), nil
}

// CreateCommit commits p.Actions on p.Branch as the robot (POST
// /projects/:id/repository/commits, doc/api/commits.md; fixtures
// api-commit-create-request.json, api-commit-create.json). The branch must
// exist. GitLab answers 400 with the service message when an action does not
// apply (for example creating a file that exists) and 403 when the robot may
// not push (GITLAB-FACTS.md §2.2).
func (c *Client) CreateCommit(ctx context.Context, projectID int64, p platform.CommitParams) (platform.Commit, error) {
	return c.createCommit(ctx, projectID, p, "")
}

// CreateBranchWithCommit creates branch p.Branch from the head of branch
// start with one commit of p.Actions, in one call: POST
// /projects/:id/repository/commits with start_branch (doc/api/commits.md),
// where a CreateBranch and a CreateCommit take two. GitLab refuses it when
// p.Branch exists, 400 "A branch called '<b>' already exists. Switch to
// that branch in order to make changes" (Commits::CreateService
// #validate_branch_existence!), which matches platform.ErrAlreadyExists;
// a start branch that does not exist answers 400 "You can only create or
// edit files when you are on a branch"; the rest as CreateCommit.
func (c *Client) CreateBranchWithCommit(ctx context.Context, projectID int64, start string, p platform.CommitParams) (platform.Commit, error) {
	return c.createCommit(ctx, projectID, p, start)
}

// createCommit is CreateCommit, creating the branch from start when start
// is not "".
func (c *Client) createCommit(ctx context.Context, projectID int64, p platform.CommitParams, start string) (platform.Commit, error) {
	if len(p.Actions) == 0 {
		return platform.Commit{}, fmt.Errorf("committing to branch %q of project %d: no file actions", p.Branch, projectID)
	}
	opt := &gl.CreateCommitOptions{
		Branch:        gl.Ptr(p.Branch),
		CommitMessage: gl.Ptr(p.Message),
		Actions:       make([]*gl.CommitActionOptions, 0, len(p.Actions)),
	}
	if start != "" {
		opt.StartBranch = gl.Ptr(start)
	}
	for _, a := range p.Actions {
		act := gl.FileActionValue(a.Action)
		ao := &gl.CommitActionOptions{Action: &act, FilePath: gl.Ptr(a.FilePath)}
		if a.Action != string(gl.FileDelete) {
			ao.Content = gl.Ptr(a.Content)
		}
		opt.Actions = append(opt.Actions, ao)
	}
	cm, err := call(ctx, c, epCommitCreate, func(o gl.RequestOptionFunc) (*gl.Commit, *gl.Response, error) {
		return c.robot.Commits.CreateCommit(projectID, opt, o)
	})
	if err != nil {
		return platform.Commit{}, fmt.Errorf("committing to branch %q of project %d: %w", p.Branch, projectID, err)
	}
	return toCommit(cm), nil
}

// Commit reads a commit by sha or ref (GET
// /projects/:id/repository/commits/:sha, doc/api/commits.md). An unknown sha
// matches platform.ErrNotFound.
func (c *Client) Commit(ctx context.Context, projectID int64, sha string) (platform.Commit, error) {
	cm, err := call(ctx, c, epCommitGet, func(o gl.RequestOptionFunc) (*gl.Commit, *gl.Response, error) {
		return c.robot.Commits.GetCommit(projectID, sha, nil, o)
	})
	if err != nil {
		return platform.Commit{}, fmt.Errorf("reading commit %s of project %d: %w", sha, projectID, err)
	}
	return toCommit(cm), nil
}

// BranchCommits returns the commits of branch that base does not have,
// oldest first (GET /projects/:id/repository/compare?from=base&to=branch,
// doc/api/repositories.md "Compare branches, tags or commits"; GitLab
// compares from the merge base). A base or branch that does not exist
// matches platform.ErrNotFound. The create step looks there for its own
// commit, which a developer's later pushes may have buried below the tip.
func (c *Client) BranchCommits(ctx context.Context, projectID int64, base, branch string) ([]platform.Commit, error) {
	cmp, err := call(ctx, c, epCompareGet, func(o gl.RequestOptionFunc) (*gl.Compare, *gl.Response, error) {
		return c.robot.Repositories.Compare(projectID, &gl.CompareOptions{From: gl.Ptr(base), To: gl.Ptr(branch)}, o)
	})
	if err != nil {
		return nil, fmt.Errorf("comparing %q with %q in project %d: %w", branch, base, projectID, err)
	}
	out := make([]platform.Commit, 0, len(cmp.Commits))
	for _, cm := range cmp.Commits {
		if cm != nil {
			out = append(out, toCommit(cm))
		}
	}
	return out, nil
}

// IsAncestor reports whether commit ancestor is an ancestor of (or equal to)
// descendant, using GET /projects/:id/repository/merge_base?refs[]=a&refs[]=b
// (doc/api/repositories.md "Merge base"): ancestor iff the merge base is
// ancestor itself. ancestor must be a full commit sha; descendant may be any
// ref.
func (c *Client) IsAncestor(ctx context.Context, projectID int64, ancestor, descendant string) (bool, error) {
	if ancestor == "" || descendant == "" {
		return false, errors.New("checking ancestry: empty ref")
	}
	refs := []string{ancestor, descendant}
	mb, err := call(ctx, c, epMergeBaseGet, func(o gl.RequestOptionFunc) (*gl.Commit, *gl.Response, error) {
		return c.robot.Repositories.MergeBase(projectID, &gl.MergeBaseOptions{Ref: &refs}, o)
	})
	if err != nil {
		return false, fmt.Errorf("checking whether %s is an ancestor of %s in project %d: %w", ancestor, descendant, projectID, err)
	}
	return mb != nil && strings.EqualFold(mb.ID, ancestor), nil
}

// maxTreePages bounds TreeFiles: 1,000 pages of 100 entries.
const maxTreePages = 1000

// TreeFiles returns the paths of every file (blob) under directory dir at
// ref, recursively, from the repository tree listing (GET
// /projects/:id/repository/tree?path=&ref=&recursive=true&per_page=100&pagination=keyset,
// doc/api/repositories.md "List repository tree"), following every page
// (keyset or offset, whichever GitLab answers with). dir "" is the root. A
// dir or ref that does not exist matches platform.ErrNotFound (GitLab
// answers 404 "Tree Not Found"). A tree of more than 100,000 entries is an
// error. One listing replaces one raw-file read per file when deciding
// between the "create" and "update" commit actions.
func (c *Client) TreeFiles(ctx context.Context, projectID int64, ref, dir string) (map[string]bool, error) {
	opt := &gl.ListTreeOptions{
		ListOptions: gl.ListOptions{PerPage: pageSize, Pagination: "keyset"},
		Ref:         gl.Ptr(ref),
		Recursive:   gl.Ptr(true),
	}
	if dir != "" {
		opt.Path = gl.Ptr(dir)
	}
	files := map[string]bool{}
	var next []gl.RequestOptionFunc
	for range maxTreePages {
		nodes, resp, err := callResp(ctx, c, epTreeList, func(o gl.RequestOptionFunc) ([]*gl.TreeNode, *gl.Response, error) {
			return c.robot.Repositories.ListTree(projectID, opt, append([]gl.RequestOptionFunc{o}, next...)...)
		})
		if err != nil {
			return nil, fmt.Errorf("listing the tree of %q at %q in project %d: %w", dir, ref, projectID, err)
		}
		for _, n := range nodes {
			if n != nil && n.Type == "blob" {
				files[n.Path] = true
			}
		}
		if resp == nil {
			return files, nil
		}
		o, ok := gl.WithNext(resp)
		if !ok {
			return files, nil
		}
		next = []gl.RequestOptionFunc{o}
	}
	return nil, fmt.Errorf("listing the tree of %q at %q in project %d: more than %d pages", dir, ref, projectID, maxTreePages)
}

// MergeAccessLevel returns the lowest access level allowed to merge into
// branch when it is protected (GET /projects/:id/protected_branches/:name,
// merge_access_levels, doc/api/protected_branches.md); protected is false
// (and level 0) for an unprotected branch (404). Entries granted to a single
// user or group (access_level 0 with user_id/group_id) are not levels and
// are ignored.
func (c *Client) MergeAccessLevel(ctx context.Context, projectID int64, branch string) (level int, protected bool, err error) {
	pb, err := call(ctx, c, epProtectedBranchGet, func(o gl.RequestOptionFunc) (*gl.ProtectedBranch, *gl.Response, error) {
		return c.robot.ProtectedBranches.GetProtectedBranch(projectID, branch, o)
	})
	if errors.Is(err, platform.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading protection of branch %q of project %d: %w", branch, projectID, err)
	}
	for _, a := range pb.MergeAccessLevels {
		if l := int(a.AccessLevel); l > 0 && (level == 0 || l < level) {
			level = l
		}
	}
	return level, true, nil
}
