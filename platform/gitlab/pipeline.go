package gitlab

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"

	retryablehttp "github.com/hashicorp/go-retryablehttp"
	gl "gitlab.com/gitlab-org/api/client-go"

	"changebot/platform"
)

// pageSize is GitLab's maximum per_page (doc/api/rest/_index.md "Pagination").
const pageSize = 100

// MergeRequestPipelines lists the pipelines of merge request !iid, newest
// (highest id) first, at most the newest 100 (GET
// /projects/:id/merge_requests/:iid/pipelines, doc/api/merge_requests.md
// "List merge request pipelines"; fixture api-mr-pipelines-list.json). The
// list entity carries id, sha, ref and status; Source and WebURL may be empty.
// A merged-results pipeline's SHA is the merge ref's, not the MR's: match the
// MR's own head pipeline through MergeRequest.HeadPipeline.
func (c *Client) MergeRequestPipelines(ctx context.Context, projectID, iid int64) ([]platform.Pipeline, error) {
	ps, err := call(ctx, c, epMergeRequestPipelinesList, func(o gl.RequestOptionFunc) ([]*gl.PipelineInfo, *gl.Response, error) {
		return c.robot.MergeRequests.ListMergeRequestPipelines(projectID, iid, o, withQuery("per_page", fmt.Sprint(pageSize)))
	})
	if err != nil {
		return nil, fmt.Errorf("listing pipelines of merge request !%d of project %d: %w", iid, projectID, err)
	}
	return newestFirst(ps), nil
}

// CreateMergeRequestPipeline starts a pipeline for merge request !iid (POST
// /projects/:id/merge_requests/:iid/pipelines, 201; doc/api/merge_requests.md
// "Create merge request pipeline"; fixture api-mr-pipeline-create.json): a
// detached pipeline on refs/merge-requests/<iid>/head, or a merged-results
// pipeline when the project enables them. GitLab.com allows 25 pipeline
// creations per minute (GITLAB-FACTS.md §2.10).
func (c *Client) CreateMergeRequestPipeline(ctx context.Context, projectID, iid int64) (platform.Pipeline, error) {
	p, err := call(ctx, c, epMergeRequestPipelineNew, func(o gl.RequestOptionFunc) (*gl.PipelineInfo, *gl.Response, error) {
		return c.robot.MergeRequests.CreateMergeRequestPipeline(projectID, iid, o)
	})
	if err != nil {
		return platform.Pipeline{}, fmt.Errorf("creating pipeline for merge request !%d of project %d: %w", iid, projectID, err)
	}
	return toPipelineInfo(p), nil
}

// CreateBranchPipeline starts a pipeline on branch ref at its head (POST
// /projects/:id/pipeline?ref=, 201 with the Pipeline entity of
// doc/api/pipelines.md "Create a new pipeline", the shape of fixture
// api-mr-pipeline-create.json). Unlike a merge request pipeline it runs
// when the head commit's message says [skip ci]: GitLab ignores the
// marker for pipelines created through this endpoint
// (lib/api/ci/pipelines.rb passes ignore_skip_ci), which is how the head
// of a merge queue gets the pipeline its deferred commit skipped
// (rules.SkipCIMarker). GitLab counts a pipeline of the merge request's
// source branch at its head sha as the merge request's head pipeline. A
// 400 is GitLab refusing to create it (the CI configuration's rules keep
// every job out for source "api", or the project has no CI); it is a
// *platform.Error.
func (c *Client) CreateBranchPipeline(ctx context.Context, projectID int64, ref string) (platform.Pipeline, error) {
	p, err := call(ctx, c, epPipelineCreate, func(o gl.RequestOptionFunc) (*gl.Pipeline, *gl.Response, error) {
		return c.robot.Pipelines.CreatePipeline(projectID, &gl.CreatePipelineOptions{Ref: gl.Ptr(ref)}, o)
	})
	if err != nil {
		return platform.Pipeline{}, fmt.Errorf("creating a pipeline for branch %q of project %d: %w", ref, projectID, err)
	}
	if pl := toPipeline(p); pl != nil {
		return *pl, nil
	}
	return platform.Pipeline{}, fmt.Errorf("creating a pipeline for branch %q of project %d: empty answer", ref, projectID)
}

// Pipelines lists the project's pipelines for ref and sha, newest first, at
// most the newest 100 (GET /projects/:id/pipelines?ref=&sha=&order_by=id
// &sort=desc, doc/api/pipelines.md "List project pipelines"). An empty ref or
// sha is not sent, so it does not filter. The reconciler uses it to find the
// deploy pipeline of a merge commit on the target branch (DESIGN.md §3).
func (c *Client) Pipelines(ctx context.Context, projectID int64, ref, sha string) ([]platform.Pipeline, error) {
	opt := &gl.ListProjectPipelinesOptions{
		ListOptions: gl.ListOptions{PerPage: pageSize},
		OrderBy:     gl.Ptr("id"),
		Sort:        gl.Ptr("desc"),
	}
	if ref != "" {
		opt.Ref = gl.Ptr(ref)
	}
	if sha != "" {
		opt.SHA = gl.Ptr(sha)
	}
	ps, err := call(ctx, c, epPipelinesList, func(o gl.RequestOptionFunc) ([]*gl.PipelineInfo, *gl.Response, error) {
		return c.robot.Pipelines.ListProjectPipelines(projectID, opt, o)
	})
	if err != nil {
		return nil, fmt.Errorf("listing pipelines of project %d for ref %q sha %q: %w", projectID, ref, sha, err)
	}
	return newestFirst(ps), nil
}

// newestFirst translates and sorts by id descending; GitLab already answers
// in that order, the sort only makes it a guarantee.
func newestFirst(ps []*gl.PipelineInfo) []platform.Pipeline {
	out := make([]platform.Pipeline, 0, len(ps))
	for _, p := range ps {
		if p != nil {
			out = append(out, toPipelineInfo(p))
		}
	}
	slices.SortStableFunc(out, func(a, b platform.Pipeline) int { return cmp.Compare(b.ID, a.ID) })
	return out
}

// withQuery sets one query parameter on a request whose client-go method
// takes no options struct.
func withQuery(key, value string) gl.RequestOptionFunc {
	return func(req *retryablehttp.Request) error {
		q, err := url.ParseQuery(req.URL.RawQuery)
		if err != nil {
			return err
		}
		q.Set(key, value)
		req.URL.RawQuery = q.Encode()
		return nil
	}
}
