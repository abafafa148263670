package github

import (
	"context"
	"fmt"
	"slices"

	gh "github.com/google/go-github/v93/github"

	"changebot/platform"
)

// Endpoint names of the repository reads (see call.go's list).
const (
	epContentsGet   = "contents_get"
	epPullFilesList = "pull_files_list"
)

// maxPullFilePages bounds ChangedPaths: GitHub lists at most 3,000 files
// of a pull request (docs.github.com "List pull requests files"), 30 pages
// of 100.
const maxPullFilePages = 30

// FileAt returns the content of the file at path (from the repository's
// root) at ref, a branch, tag or commit sha (GET
// /repos/{o}/{r}/contents/{path}?ref=, docs.github.com "Get repository
// content", base64 content; fixture api-repos-get-content-file.json). A
// file or ref that does not exist (404), or a directory at path, matches
// platform.ErrNotFound. GitHub sends the content of files up to 1 MB this
// way; a larger one is an error.
func (c *Client) FileAt(ctx context.Context, projectID int64, path, ref string) ([]byte, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return nil, fmt.Errorf("reading file %q at %q: %w", path, ref, err)
	}
	file, err := call(ctx, c, epContentsGet, func(ctx context.Context) (*gh.RepositoryContent, *gh.Response, error) {
		f, _, resp, err := c.robot.Repositories.GetContents(ctx, r.owner, r.name, path, &gh.RepositoryContentGetOptions{Ref: ref})
		return f, resp, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading file %q at %q of %s: %w", path, ref, r, err)
	}
	if file == nil || file.GetType() != "file" {
		return nil, fmt.Errorf("reading file %q at %q of %s: a directory, not a file: %w", path, ref, r, platform.ErrNotFound)
	}
	text, err := file.GetContent()
	if err != nil {
		return nil, fmt.Errorf("decoding file %q at %q of %s (%d bytes): %w", path, ref, r, file.GetSize(), err)
	}
	return []byte(text), nil
}

// ChangedPaths returns the paths pull request number iid changes, sorted
// and each once: every file's filename and, for a renamed one, its
// previous_filename (GET /repos/{o}/{r}/pulls/{n}/files, every page of
// 100; docs.github.com "List pull requests files"; fixture
// api-pulls-list-files.json). A pull request that does not exist matches
// platform.ErrNotFound. GitHub lists at most 3,000 files; a larger pull
// request gives those.
func (c *Client) ChangedPaths(ctx context.Context, projectID, iid int64) ([]string, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return nil, fmt.Errorf("listing the changed files of pull request #%d: %w", iid, err)
	}
	opt := &gh.ListOptions{PerPage: 100, Page: 1}
	var paths []string
	for range maxPullFilePages {
		files, resp, err := callResp(ctx, c, epPullFilesList, func(ctx context.Context) ([]*gh.CommitFile, *gh.Response, error) {
			return c.robot.PullRequests.ListFiles(ctx, r.owner, r.name, int(iid), opt)
		})
		if err != nil {
			return nil, fmt.Errorf("listing the changed files of pull request #%d of %s: %w", iid, r, err)
		}
		for _, f := range files {
			for _, p := range []string{f.GetFilename(), f.GetPreviousFilename()} {
				if p != "" {
					paths = append(paths, p)
				}
			}
		}
		if resp == nil || resp.NextPage == 0 || resp.NextPage <= opt.Page {
			break
		}
		opt.Page = resp.NextPage
	}
	slices.Sort(paths)
	return slices.Compact(paths), nil
}
