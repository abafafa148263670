package gitlab

import (
	"context"
	"fmt"
	"slices"

	gl "gitlab.com/gitlab-org/api/client-go"
)

// Endpoint names of the repository reads (see call.go's list).
const (
	epFileRawGet            = "file_raw_get"
	epMergeRequestDiffsList = "merge_request_diffs_list"
)

// maxDiffPages bounds ChangedPaths: 100 pages of 100 files, more than
// GitLab's own diff limits let a merge request show (doc/administration
// /instance_limits.md "Diff limits": 1,000 files by default).
const maxDiffPages = 100

// FileAt returns the content of the file at path (from the repository's
// root) at ref, a branch, tag or commit sha (GET
// /projects/:id/repository/files/:file_path/raw?ref=,
// doc/api/repository_files.md "Get raw file from repository"). A file or
// ref that does not exist matches platform.ErrNotFound (GitLab answers 404
// "File Not Found" or "Commit Not Found").
func (c *Client) FileAt(ctx context.Context, projectID int64, path, ref string) ([]byte, error) {
	b, err := call(ctx, c, epFileRawGet, func(o gl.RequestOptionFunc) ([]byte, *gl.Response, error) {
		return c.robot.RepositoryFiles.GetRawFile(projectID, path, &gl.GetRawFileOptions{Ref: gl.Ptr(ref)}, o)
	})
	if err != nil {
		return nil, fmt.Errorf("reading file %q at %q of project %d: %w", path, ref, projectID, err)
	}
	return b, nil
}

// ChangedPaths returns the paths merge request iid changes, sorted and
// each once: both the old and the new path of every file of its diff, so a
// rename counts both (GET /projects/:id/merge_requests/:iid/diffs,
// doc/api/merge_requests.md "List merge request diffs", every page; fixture
// api-mr-diffs-list.json). A merge request that does not exist matches
// platform.ErrNotFound. GitLab limits the files a diff lists (its diff
// limits); a merge request beyond them gives what GitLab lists.
func (c *Client) ChangedPaths(ctx context.Context, projectID, iid int64) ([]string, error) {
	opt := &gl.ListMergeRequestDiffsOptions{ListOptions: gl.ListOptions{PerPage: pageSize, Page: 1}}
	var paths []string
	for range maxDiffPages {
		diffs, resp, err := callResp(ctx, c, epMergeRequestDiffsList, func(o gl.RequestOptionFunc) ([]*gl.MergeRequestDiff, *gl.Response, error) {
			return c.robot.MergeRequests.ListMergeRequestDiffs(projectID, iid, opt, o)
		})
		if err != nil {
			return nil, fmt.Errorf("listing the changed files of merge request !%d of project %d: %w", iid, projectID, err)
		}
		for _, d := range diffs {
			if d == nil {
				continue
			}
			for _, p := range []string{d.OldPath, d.NewPath} {
				if p != "" {
					paths = append(paths, p)
				}
			}
		}
		if resp == nil || resp.NextPage == 0 || resp.NextPage <= opt.Page {
			slices.Sort(paths)
			return slices.Compact(paths), nil
		}
		opt.Page = resp.NextPage
	}
	return nil, fmt.Errorf("listing the changed files of merge request !%d of project %d: more than %d pages", iid, projectID, maxDiffPages)
}
