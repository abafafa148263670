package gitlab

import (
	"context"
	"fmt"

	gl "gitlab.com/gitlab-org/api/client-go"

	"changebot/platform"
)

// FindOpenMergeRequest returns the open merge request whose source branch is
// sourceBranch in the same project (GET /projects/:id/merge_requests
// ?state=opened&source_branch=..., doc/api/merge_requests.md "List project
// merge requests"); MRs from forks are ignored. GitLab allows one open MR per
// source branch (409 on create, GITLAB-FACTS.md §2.3); should several be
// listed, the newest wins. None open matches platform.ErrNotFound.
//
// The list entity lacks head_pipeline, merge_error and rebase_in_progress:
// read the MR with MergeRequest before acting on them.
func (c *Client) FindOpenMergeRequest(ctx context.Context, projectID int64, sourceBranch string) (platform.MergeRequest, error) {
	opt := &gl.ListProjectMergeRequestsOptions{
		ListOptions:  gl.ListOptions{PerPage: 20},
		State:        gl.Ptr(platform.MRStateOpened),
		SourceBranch: gl.Ptr(sourceBranch),
		OrderBy:      gl.Ptr("created_at"),
		Sort:         gl.Ptr("desc"),
	}
	mrs, err := call(ctx, c, epMergeRequestList, func(o gl.RequestOptionFunc) ([]*gl.BasicMergeRequest, *gl.Response, error) {
		return c.robot.MergeRequests.ListProjectMergeRequests(projectID, opt, o)
	})
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("finding open merge request for branch %q in project %d: %w", sourceBranch, projectID, err)
	}
	for _, m := range mrs {
		if m == nil || m.SourceBranch != sourceBranch || m.State != platform.MRStateOpened {
			continue
		}
		if m.SourceProjectID != 0 && m.SourceProjectID != projectID {
			continue
		}
		return toBasicMergeRequest(m), nil
	}
	return platform.MergeRequest{}, fmt.Errorf("finding open merge request for branch %q in project %d: %w", sourceBranch, projectID, platform.ErrNotFound)
}

// CreateMergeRequest opens a merge request as the robot (POST
// /projects/:id/merge_requests, doc/api/merge_requests.md "Create MR"). An
// open MR for the same source branch answers 409 with the message "Another
// open merge request already exists for this source branch: !<iid>"
// (GITLAB-FACTS.md §2.3). Mergeability is not computed yet in the answer:
// poll MergeRequest.
func (c *Client) CreateMergeRequest(ctx context.Context, projectID int64, p platform.CreateMRParams) (platform.MergeRequest, error) {
	opt := &gl.CreateMergeRequestOptions{
		Title:        gl.Ptr(p.Title),
		SourceBranch: gl.Ptr(p.SourceBranch),
		TargetBranch: gl.Ptr(p.TargetBranch),
	}
	if p.Description != "" {
		opt.Description = gl.Ptr(p.Description)
	}
	if p.RemoveSourceBranch {
		opt.RemoveSourceBranch = gl.Ptr(true)
	}
	if p.Squash {
		opt.Squash = gl.Ptr(true)
	}
	m, err := call(ctx, c, epMergeRequestCreate, func(o gl.RequestOptionFunc) (*gl.MergeRequest, *gl.Response, error) {
		return c.robot.MergeRequests.CreateMergeRequest(projectID, opt, o)
	})
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("creating merge request from %q to %q in project %d: %w", p.SourceBranch, p.TargetBranch, projectID, err)
	}
	return toMergeRequest(m), nil
}

// MergeRequest reads merge request !iid (GET
// /projects/:id/merge_requests/:iid, doc/api/merge_requests.md "Get single
// MR"; fixtures api-mr-get.json, api-mr-get-doc.json,
// api-mr-rebase-failed.json). With includeRebase it asks
// include_rebase_in_progress=true, which is how a rebase is polled
// (GITLAB-FACTS.md §2.7). A missing MR matches platform.ErrNotFound.
func (c *Client) MergeRequest(ctx context.Context, projectID, iid int64, includeRebase bool) (platform.MergeRequest, error) {
	var opt *gl.GetMergeRequestsOptions
	if includeRebase {
		opt = &gl.GetMergeRequestsOptions{IncludeRebaseInProgress: gl.Ptr(true)}
	}
	m, err := call(ctx, c, epMergeRequestGet, func(o gl.RequestOptionFunc) (*gl.MergeRequest, *gl.Response, error) {
		return c.robot.MergeRequests.GetMergeRequest(projectID, iid, opt, o)
	})
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("reading merge request !%d of project %d: %w", iid, projectID, err)
	}
	return toMergeRequest(m), nil
}

// CloseMergeRequest closes merge request !iid (PUT
// /projects/:id/merge_requests/:iid with state_event=close,
// doc/api/merge_requests.md "Update MR"). Closing a closed MR is a no-op on
// GitLab's side; callers skip merged MRs (DESIGN.md §3 "Cancel").
func (c *Client) CloseMergeRequest(ctx context.Context, projectID, iid int64) (platform.MergeRequest, error) {
	opt := &gl.UpdateMergeRequestOptions{StateEvent: gl.Ptr("close")}
	m, err := call(ctx, c, epMergeRequestUpdate, func(o gl.RequestOptionFunc) (*gl.MergeRequest, *gl.Response, error) {
		return c.robot.MergeRequests.UpdateMergeRequest(projectID, iid, opt, o)
	})
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("closing merge request !%d of project %d: %w", iid, projectID, err)
	}
	return toMergeRequest(m), nil
}

// Approvals returns who has approved merge request !iid, in GitLab's order
// (GET /projects/:id/merge_requests/:iid/approvals, approved_by[].user;
// doc/api/merge_request_approvals.md; fixture api-mr-approvals-get.json).
// Works on Free and Premium.
func (c *Client) Approvals(ctx context.Context, projectID, iid int64) ([]platform.User, error) {
	a, err := call(ctx, c, epMergeRequestApprovalsGet, func(o gl.RequestOptionFunc) (*gl.MergeRequestApprovals, *gl.Response, error) {
		return c.robot.MergeRequestApprovals.GetConfiguration(projectID, iid, o)
	})
	if err != nil {
		return nil, fmt.Errorf("reading approvals of merge request !%d of project %d: %w", iid, projectID, err)
	}
	return approvers(a), nil
}

func approvers(a *gl.MergeRequestApprovals) []platform.User {
	if a == nil {
		return []platform.User{}
	}
	users := make([]platform.User, 0, len(a.ApprovedBy))
	for _, ab := range a.ApprovedBy {
		if ab != nil && ab.User != nil {
			users = append(users, toUser(ab.User))
		}
	}
	return users
}

// Merge merges merge request !iid at once (PUT
// /projects/:id/merge_requests/:iid/merge, doc/api/merge_requests.md "Merge a
// merge request"). p.SHA is required: GitLab answers 409 "SHA does not match
// HEAD of source branch" when the head moved; 405, 406 (older GitLab) or 422
// mean "not mergeable now" and 401 "not allowed" (GITLAB-FACTS.md §2.6).
// Squash is sent only when true, so the project's squash setting applies
// otherwise; CommitMessage, when set, is used for the merge commit and, when
// squashing, for the squash commit. auto_merge is never sent: the bot merges
// only after it has seen the pipeline pass.
func (c *Client) Merge(ctx context.Context, projectID, iid int64, p platform.MergeParams) (platform.MergeRequest, error) {
	if p.SHA == "" {
		return platform.MergeRequest{}, fmt.Errorf("merging merge request !%d: sha is empty", iid)
	}
	opt := &gl.AcceptMergeRequestOptions{SHA: gl.Ptr(p.SHA)}
	if p.Squash {
		opt.Squash = gl.Ptr(true)
	}
	if p.CommitMessage != "" {
		opt.MergeCommitMessage = gl.Ptr(p.CommitMessage)
		if p.Squash {
			opt.SquashCommitMessage = gl.Ptr(p.CommitMessage)
		}
	}
	m, err := call(ctx, c, epMergeRequestMerge, func(o gl.RequestOptionFunc) (*gl.MergeRequest, *gl.Response, error) {
		return c.robot.MergeRequests.AcceptMergeRequest(projectID, iid, opt, o)
	})
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("merging merge request !%d of project %d: %w", iid, projectID, err)
	}
	return toMergeRequest(m), nil
}

// Rebase asks GitLab to rebase the source branch of merge request !iid onto
// its target (PUT /projects/:id/merge_requests/:iid/rebase, 202
// {"rebase_in_progress": true}; fixture api-mr-rebase-accepted.json). The
// rebase runs asynchronously: poll MergeRequest with includeRebase until
// RebaseInProgress is false, then look at MergeError (fixture
// api-mr-rebase-failed.json). 403 means the robot cannot push to the source
// branch, 409 "Failed to enqueue the rebase operation" (GITLAB-FACTS.md §2.7).
func (c *Client) Rebase(ctx context.Context, projectID, iid int64) error {
	_, err := call(ctx, c, epMergeRequestRebase, func(o gl.RequestOptionFunc) (struct{}, *gl.Response, error) {
		resp, err := c.robot.MergeRequests.RebaseMergeRequest(projectID, iid, nil, o)
		return struct{}{}, resp, err
	})
	if err != nil {
		return fmt.Errorf("rebasing merge request !%d of project %d: %w", iid, projectID, err)
	}
	return nil
}

// AddToMergeTrain adds merge request !iid to the merge train of its target
// branch (POST /projects/:id/merge_trains/merge_requests/:iid with sha and
// squash, doc/api/merge_trains.md "Add a merge request to a merge train";
// Premium): GitLab then runs the train pipeline and merges it itself. sha
// is required (409 "SHA does not match HEAD of source branch" when the
// head moved); 400 means it cannot join now, 403 that the project has no
// merge trains, 401 that the robot may not merge.
func (c *Client) AddToMergeTrain(ctx context.Context, projectID, iid int64, sha string, squash bool) error {
	if sha == "" {
		return fmt.Errorf("adding merge request !%d to its merge train: sha is empty", iid)
	}
	opt := &gl.AddMergeRequestToMergeTrainOptions{SHA: gl.Ptr(sha)}
	if squash {
		opt.Squash = gl.Ptr(true)
	}
	_, err := call(ctx, c, epMergeTrainAdd, func(o gl.RequestOptionFunc) ([]*gl.MergeTrain, *gl.Response, error) {
		return c.robot.MergeTrains.AddMergeRequestToMergeTrain(projectID, iid, opt, o)
	})
	if err != nil {
		return fmt.Errorf("adding merge request !%d of project %d to its merge train: %w", iid, projectID, err)
	}
	return nil
}

// MergeTrainCar reads merge request !iid's car on its merge train (GET
// /projects/:id/merge_trains/merge_requests/:iid, doc/api/merge_trains.md
// "Get the status of a merge request on a merge train"): its status (idle,
// stale, fresh, merging, merged, skip_merged) and its train pipeline.
// platform.ErrNotFound when the merge request is on no train (never added,
// or removed: its train pipeline failed, or a person took it off).
func (c *Client) MergeTrainCar(ctx context.Context, projectID, iid int64) (platform.TrainCar, error) {
	car, err := call(ctx, c, epMergeTrainCarGet, func(o gl.RequestOptionFunc) (*gl.MergeTrain, *gl.Response, error) {
		return c.robot.MergeTrains.GetMergeRequestOnAMergeTrain(projectID, iid, o)
	})
	if err != nil {
		return platform.TrainCar{}, fmt.Errorf("reading the merge train car of merge request !%d of project %d: %w", iid, projectID, err)
	}
	out := platform.TrainCar{Status: car.Status}
	if car.Pipeline != nil {
		out.PipelineID, out.PipelineStatus, out.PipelineURL = car.Pipeline.ID, car.Pipeline.Status, car.Pipeline.WebURL
	}
	return out, nil
}
