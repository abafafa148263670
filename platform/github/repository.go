package github

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	gh "github.com/google/go-github/v93/github"

	"changebot/platform"
)

// shaPattern matches a full commit sha.
var shaPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Branch reads a branch through its ref (GET
// /repos/{o}/{r}/git/ref/heads/{branch}, fixture api-git-ref.json). A
// missing branch matches platform.ErrNotFound.
func (c *Client) Branch(ctx context.Context, projectID int64, name string) (platform.Branch, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.Branch{}, fmt.Errorf("reading branch %q: %w", name, err)
	}
	sha, err := c.branchSHA(ctx, r, name)
	if err != nil {
		return platform.Branch{}, fmt.Errorf("reading branch %q of %s: %w", name, r, err)
	}
	return platform.Branch{Name: name, CommitSHA: sha}, nil
}

// branchSHA is the commit at the tip of branch.
func (c *Client) branchSHA(ctx context.Context, r repoRef, branch string) (string, error) {
	ref, err := call(ctx, c, epRefGet, func(ctx context.Context) (*gh.Reference, *gh.Response, error) {
		return c.robot.Git.GetRef(ctx, r.owner, r.name, "heads/"+branch)
	})
	if err != nil {
		return "", err
	}
	return ref.GetObject().GetSHA(), nil
}

// CreateBranch creates branch name at ref, a branch name or a full commit
// sha (a branch is resolved with one ref read first; POST
// /repos/{o}/{r}/git/refs with refs/heads/<name>, 201; fixtures
// api-git-create-ref-request.json, api-real-git-create-ref.exchange.json).
// An existing branch answers 422 "Reference already exists", which
// matches platform.ErrAlreadyExists.
func (c *Client) CreateBranch(ctx context.Context, projectID int64, name, ref string) (platform.Branch, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.Branch{}, fmt.Errorf("creating branch %q: %w", name, err)
	}
	sha := ref
	if !shaPattern.MatchString(ref) {
		if sha, err = c.branchSHA(ctx, r, ref); err != nil {
			return platform.Branch{}, fmt.Errorf("creating branch %q from %q in %s: %w", name, ref, r, err)
		}
	}
	created, err := call(ctx, c, epRefCreate, func(ctx context.Context) (*gh.Reference, *gh.Response, error) {
		return c.robot.Git.CreateRef(ctx, r.owner, r.name, gh.CreateRef{Ref: "refs/heads/" + name, SHA: sha})
	})
	if err != nil {
		return platform.Branch{}, fmt.Errorf("creating branch %q from %q in %s: %w", name, ref, r, err)
	}
	return platform.Branch{Name: name, CommitSHA: created.GetObject().GetSHA()}, nil
}

// DeleteBranch deletes branch name (DELETE
// /repos/{o}/{r}/git/refs/heads/{branch}, 204). A missing branch (422
// "Reference does not exist") matches platform.ErrNotFound.
func (c *Client) DeleteBranch(ctx context.Context, projectID int64, name string) error {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return fmt.Errorf("deleting branch %q: %w", name, err)
	}
	_, err = call(ctx, c, epRefDelete, func(ctx context.Context) (struct{}, *gh.Response, error) {
		resp, err := c.robot.Git.DeleteRef(ctx, r.owner, r.name, "heads/"+name)
		return struct{}{}, resp, err
	})
	if err != nil {
		return fmt.Errorf("deleting branch %q of %s: %w", name, r, err)
	}
	return nil
}

// File modes of tree entries (docs.github.com "Create a tree").
const modeFile = "100644"

// CreateCommit commits p.Actions on p.Branch as one commit through the Git
// Data API (docs.github.com "Git database"): read the branch's ref and its
// commit's tree, one blob per created or updated file (POST .../git/blobs,
// fixture api-git-create-blob.json), one tree on top of the old one
// (POST .../git/trees with base_tree; a deleted file is an entry with
// sha null; fixture api-git-create-tree.json), the commit with the tip as
// its parent (POST .../git/commits, fixture api-git-create-commit.json),
// and the ref moved to it without force (PATCH .../git/refs/heads/{b},
// fixture api-real-git-update-ref.exchange.json). 2 reads + n blobs + 3
// writes. Actions create and update write the content; delete removes
// the path; move is not supported (platform.FileAction has no previous
// path). When the branch moved meanwhile GitHub refuses the ref update
// (422 "Update is not a fast forward"), which matches platform.ErrConflict;
// the objects written stay unreferenced and harmless.
func (c *Client) CreateCommit(ctx context.Context, projectID int64, p platform.CommitParams) (platform.Commit, error) {
	if len(p.Actions) == 0 {
		return platform.Commit{}, fmt.Errorf("committing to branch %q of repository %d: no file actions", p.Branch, projectID)
	}
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.Commit{}, fmt.Errorf("committing to branch %q: %w", p.Branch, err)
	}
	fail := func(err error) (platform.Commit, error) {
		return platform.Commit{}, fmt.Errorf("committing to branch %q of %s: %w", p.Branch, r, err)
	}
	entries := make([]*gh.TreeEntry, 0, len(p.Actions))
	for _, a := range p.Actions {
		switch a.Action {
		case "create", "update":
		case "delete":
			entries = append(entries, &gh.TreeEntry{Path: new(a.FilePath), Mode: new(modeFile), Type: new("blob")})
			continue
		default:
			return fail(fmt.Errorf("file action %q on %q is not supported on GitHub", a.Action, a.FilePath))
		}
	}
	tip, err := c.branchSHA(ctx, r, p.Branch)
	if err != nil {
		return fail(err)
	}
	parent, err := call(ctx, c, epCommitGet, func(ctx context.Context) (*gh.Commit, *gh.Response, error) {
		return c.robot.Git.GetCommit(ctx, r.owner, r.name, tip)
	})
	if err != nil {
		return fail(err)
	}
	for _, a := range p.Actions {
		if a.Action == "delete" {
			continue
		}
		blob, err := call(ctx, c, epBlobCreate, func(ctx context.Context) (*gh.Blob, *gh.Response, error) {
			return c.robot.Git.CreateBlob(ctx, r.owner, r.name, gh.Blob{Content: a.Content, Encoding: new("utf-8")})
		})
		if err != nil {
			return fail(err)
		}
		entries = append(entries, &gh.TreeEntry{Path: new(a.FilePath), Mode: new(modeFile), Type: new("blob"), SHA: blob.SHA})
	}
	tree, err := call(ctx, c, epTreeCreate, func(ctx context.Context) (*gh.Tree, *gh.Response, error) {
		return c.robot.Git.CreateTree(ctx, r.owner, r.name, parent.GetTree().GetSHA(), entries)
	})
	if err != nil {
		return fail(err)
	}
	commit, err := call(ctx, c, epCommitCreate, func(ctx context.Context) (*gh.Commit, *gh.Response, error) {
		return c.robot.Git.CreateCommit(ctx, r.owner, r.name, gh.Commit{
			Message: new(p.Message),
			Tree:    &gh.Tree{SHA: tree.SHA},
			Parents: []*gh.Commit{{SHA: new(tip)}},
		}, nil)
	})
	if err != nil {
		return fail(err)
	}
	_, err = call(ctx, c, epRefUpdate, func(ctx context.Context) (*gh.Reference, *gh.Response, error) {
		return c.robot.Git.UpdateRef(ctx, r.owner, r.name, "heads/"+p.Branch, gh.UpdateRef{SHA: commit.GetSHA()})
	})
	if err != nil {
		return fail(err)
	}
	out := toCommit(commit)
	if len(out.ParentIDs) == 0 {
		out.ParentIDs = []string{tip}
	}
	return out, nil
}

// Commit reads a commit by sha or ref (GET /repos/{o}/{r}/commits/{ref}).
// An unknown sha matches platform.ErrNotFound (GitHub answers 422 "No
// commit found for SHA" for a well-formed unknown one, which is mapped to
// ErrNotFound too).
func (c *Client) Commit(ctx context.Context, projectID int64, sha string) (platform.Commit, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.Commit{}, fmt.Errorf("reading commit %s: %w", sha, err)
	}
	cm, err := call(ctx, c, epCommitsList, func(ctx context.Context) (*gh.RepositoryCommit, *gh.Response, error) {
		return c.robot.Repositories.GetCommit(ctx, r.owner, r.name, sha, nil)
	})
	if err != nil {
		return platform.Commit{}, fmt.Errorf("reading commit %s of %s: %w", sha, r, err)
	}
	return toRepoCommit(cm), nil
}

// BranchCommits returns the commits of branch that base does not have,
// oldest first (GET /repos/{o}/{r}/compare/{base}...{branch}, from the
// merge base; GitHub lists at most 250). A base or branch that does not
// exist matches platform.ErrNotFound.
func (c *Client) BranchCommits(ctx context.Context, projectID int64, base, branch string) ([]platform.Commit, error) {
	cmp, err := c.compare(ctx, projectID, base, branch)
	if err != nil {
		return nil, fmt.Errorf("comparing %q with %q in repository %d: %w", branch, base, projectID, err)
	}
	out := make([]platform.Commit, 0, len(cmp.Commits))
	for _, cm := range cmp.Commits {
		if cm != nil {
			out = append(out, toRepoCommit(cm))
		}
	}
	return out, nil
}

func (c *Client) compare(ctx context.Context, projectID int64, base, head string) (*gh.CommitsComparison, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return nil, err
	}
	return call(ctx, c, epCompare, func(ctx context.Context) (*gh.CommitsComparison, *gh.Response, error) {
		return c.robot.Repositories.CompareCommits(ctx, r.owner, r.name, base, head, &gh.ListOptions{PerPage: 1})
	})
}

// IsAncestor reports whether ancestor is an ancestor of (or equal to)
// descendant: GET /repos/{o}/{r}/compare/{ancestor}...{descendant} answers
// status "ahead" or "identical" exactly then ("behind" and "diverged"
// otherwise).
func (c *Client) IsAncestor(ctx context.Context, projectID int64, ancestor, descendant string) (bool, error) {
	if ancestor == "" || descendant == "" {
		return false, errors.New("checking ancestry: empty ref")
	}
	cmp, err := c.compare(ctx, projectID, ancestor, descendant)
	if err != nil {
		return false, fmt.Errorf("checking whether %s is an ancestor of %s in repository %d: %w", ancestor, descendant, projectID, err)
	}
	s := cmp.GetStatus()
	return s == "ahead" || s == "identical", nil
}

// TreeFiles returns the paths of every file (blob) under directory dir at
// ref (a full commit sha, or a branch resolved first through its ref),
// recursively, from one recursive tree read (GET
// /repos/{o}/{r}/git/trees/{sha}?recursive=1). dir "" is the root; paths
// are full paths from the root, as GitLab answers them. A ref that does
// not exist, or a dir with no entry, matches platform.ErrNotFound. A tree
// GitHub truncated (over 100,000 entries or 7 MB) is an error.
func (c *Client) TreeFiles(ctx context.Context, projectID int64, ref, dir string) (map[string]bool, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return nil, fmt.Errorf("listing the tree of %q at %q: %w", dir, ref, err)
	}
	sha := ref
	if !shaPattern.MatchString(ref) {
		// A branch name may hold slashes ("changebot/op_…"), which the
		// trees path does not take unescaped: resolve it through its ref.
		if sha, err = c.branchSHA(ctx, r, ref); err != nil {
			return nil, fmt.Errorf("listing the tree of %q at %q in %s: %w", dir, ref, r, err)
		}
	}
	tree, err := call(ctx, c, epTreeGet, func(ctx context.Context) (*gh.Tree, *gh.Response, error) {
		return c.robot.Git.GetTree(ctx, r.owner, r.name, sha, true)
	})
	if err != nil {
		return nil, fmt.Errorf("listing the tree of %q at %q in %s: %w", dir, ref, r, err)
	}
	if tree.GetTruncated() {
		return nil, fmt.Errorf("listing the tree of %q at %q in %s: GitHub truncated the tree", dir, ref, r)
	}
	dir = strings.Trim(dir, "/")
	files := map[string]bool{}
	found := dir == ""
	for _, e := range tree.Entries {
		p := e.GetPath()
		if dir != "" && p != dir && !strings.HasPrefix(p, dir+"/") {
			continue
		}
		found = true
		if e.GetType() == "blob" && p != dir {
			files[p] = true
		}
	}
	if !found {
		return nil, fmt.Errorf("listing the tree of %q at %q in %s: %w", dir, ref, r, platform.ErrNotFound)
	}
	return files, nil
}
