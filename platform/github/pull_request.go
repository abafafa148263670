package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	gh "github.com/google/go-github/v93/github"

	"changebot/platform"
)

// pageSize is GitHub's maximum per_page.
const pageSize = 100

// maxPages bounds every paged scan (reviews, comments): 100 pages of 100.
const maxPages = 100

// FindOpenMergeRequest returns the open pull request from sourceBranch of
// the same repository (GET /repos/{o}/{r}/pulls?state=open&head=<owner>:
// <branch>&sort=created&direction=desc); pull requests from forks are not
// listed by that head filter. GitHub allows one open pull request per head
// and base; should several be listed, the newest wins. None matches
// platform.ErrNotFound. mergeable is not in the list entity: read the pull
// request with MergeRequest before acting on it.
func (c *Client) FindOpenMergeRequest(ctx context.Context, projectID int64, sourceBranch string) (platform.MergeRequest, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("finding open pull request for branch %q: %w", sourceBranch, err)
	}
	prs, err := call(ctx, c, epPullList, func(ctx context.Context) ([]*gh.PullRequest, *gh.Response, error) {
		return c.robot.PullRequests.List(ctx, r.owner, r.name, &gh.PullRequestListOptions{
			State: "open", Head: r.owner + ":" + sourceBranch, Sort: "created", Direction: "desc",
			ListOptions: gh.ListOptions{PerPage: 20},
		})
	})
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("finding open pull request for branch %q in %s: %w", sourceBranch, r, err)
	}
	for _, pr := range prs {
		if pr != nil && pr.GetHead().GetRef() == sourceBranch && pr.GetState() == "open" &&
			(pr.GetHead().GetRepo() == nil || pr.GetHead().GetRepo().GetID() == projectID) {
			return toMergeRequest(pr, projectID, nil), nil
		}
	}
	return platform.MergeRequest{}, fmt.Errorf("finding open pull request for branch %q in %s: %w", sourceBranch, r, platform.ErrNotFound)
}

// CreateMergeRequest opens a pull request as the robot (POST
// /repos/{o}/{r}/pulls, 201; fixtures api-pulls-create-request.json,
// api-pulls-get.json). An open pull request for the same head and base
// answers 422 "A pull request already exists for <owner>:<branch>.",
// which matches platform.ErrAlreadyExists. RemoveSourceBranch has no
// per-pull-request switch on GitHub (the repository's
// delete_branch_on_merge decides) and is ignored. mergeable is null in the
// answer: poll MergeRequest.
func (c *Client) CreateMergeRequest(ctx context.Context, projectID int64, p platform.CreateMRParams) (platform.MergeRequest, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("creating pull request from %q: %w", p.SourceBranch, err)
	}
	pr, err := call(ctx, c, epPullCreate, func(ctx context.Context) (*gh.PullRequest, *gh.Response, error) {
		return c.robot.PullRequests.Create(ctx, r.owner, r.name, gh.CreatePullRequest{
			Title: new(p.Title), Head: p.SourceBranch, Base: p.TargetBranch, Body: new(p.Description),
		})
	})
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("creating pull request from %q to %q in %s: %w", p.SourceBranch, p.TargetBranch, r, err)
	}
	return toMergeRequest(pr, projectID, nil), nil
}

// MergeRequest reads pull request #iid (GET /repos/{o}/{r}/pulls/{n},
// fixture api-pulls-get.json). While it is open and mergeable is null
// (GitHub is computing the test merge) it is read again, at most
// Config.MergeableReads times in all, waiting MergeableWait and doubling;
// still null then, DetailedMergeStatus is "checking" (never read as not
// mergeable). An open pull request also gets HeadPipeline, synthesized
// from the head sha's check runs and commit statuses and the base
// branch's required contexts (headPipeline: two or three more reads).
// RebaseInProgress is always false: GitHub's update-branch has no progress
// flag, and whether one is still running is the flow's to know (the head
// it was requested on, stored with the change: flows' rebaseRunning), so
// that every replica and a restart see it (issue 21 point 7);
// includeRebase changes nothing here. A missing pull request matches
// platform.ErrNotFound.
func (c *Client) MergeRequest(ctx context.Context, projectID, iid int64, includeRebase bool) (platform.MergeRequest, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("reading pull request #%d: %w", iid, err)
	}
	var pr *gh.PullRequest
	wait := c.mergeableWait
	for read := 1; ; read++ {
		pr, err = c.readPull(ctx, r, iid)
		if err != nil {
			return platform.MergeRequest{}, fmt.Errorf("reading pull request #%d of %s: %w", iid, r, err)
		}
		if pr.Mergeable != nil || pr.GetState() != "open" || read >= c.mergeableReads {
			break
		}
		if err := c.sleep(ctx, wait); err != nil {
			return platform.MergeRequest{}, fmt.Errorf("reading pull request #%d of %s: %w", iid, r, err)
		}
		wait *= 2
	}
	var head *platform.Pipeline
	if pr.GetState() == "open" {
		head, err = c.headPipeline(ctx, r, pr)
		if err != nil {
			return platform.MergeRequest{}, fmt.Errorf("reading the checks of pull request #%d of %s: %w", iid, r, err)
		}
	}
	return toMergeRequest(pr, projectID, head), nil
}

func (c *Client) readPull(ctx context.Context, r repoRef, iid int64) (*gh.PullRequest, error) {
	return call(ctx, c, epPullGet, func(ctx context.Context) (*gh.PullRequest, *gh.Response, error) {
		return c.robot.PullRequests.Get(ctx, r.owner, r.name, int(iid))
	})
}

// CloseMergeRequest closes pull request #iid (PATCH /repos/{o}/{r}/pulls/{n}
// with state closed). Closing a closed one is a no-op on GitHub's side.
func (c *Client) CloseMergeRequest(ctx context.Context, projectID, iid int64) (platform.MergeRequest, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("closing pull request #%d: %w", iid, err)
	}
	pr, err := call(ctx, c, epPullUpdate, func(ctx context.Context) (*gh.PullRequest, *gh.Response, error) {
		return c.robot.PullRequests.Edit(ctx, r.owner, r.name, int(iid), &gh.PullRequest{State: new("closed")})
	})
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("closing pull request #%d of %s: %w", iid, r, err)
	}
	return toMergeRequest(pr, projectID, nil), nil
}

// reviews lists every review of pull request #iid, oldest first (GET
// /repos/{o}/{r}/pulls/{n}/reviews, fixture api-pulls-list-reviews.json).
func (c *Client) reviews(ctx context.Context, r repoRef, iid int64) ([]*gh.PullRequestReview, error) {
	var all []*gh.PullRequestReview
	opt := &gh.ListOptions{PerPage: pageSize, Page: 1}
	for range maxPages {
		rs, resp, err := callResp(ctx, c, epReviewsList, func(ctx context.Context) ([]*gh.PullRequestReview, *gh.Response, error) {
			return c.robot.PullRequests.ListReviews(ctx, r.owner, r.name, int(iid), opt)
		})
		if err != nil {
			return nil, err
		}
		all = append(all, rs...)
		if resp == nil || resp.NextPage == 0 || resp.NextPage <= opt.Page {
			break
		}
		opt.Page = resp.NextPage
	}
	return all, nil
}

// Review states of the REST API (upper case; webhooks send lower case).
const (
	reviewApproved  = "APPROVED"
	reviewChanges   = "CHANGES_REQUESTED"
	reviewDismissed = "DISMISSED"
)

// latestApprovals returns, per reviewer in order of their first review,
// the latest review whose state is APPROVED, CHANGES_REQUESTED or
// DISMISSED (a COMMENTED review changes nothing, as on GitHub), keeping
// those that are APPROVED.
func latestApprovals(rs []*gh.PullRequestReview) []*gh.PullRequestReview {
	var order []int64
	latest := map[int64]*gh.PullRequestReview{}
	for _, rv := range rs {
		if rv == nil || rv.GetUser().GetID() == 0 {
			continue
		}
		switch rv.GetState() {
		case reviewApproved, reviewChanges, reviewDismissed:
		default:
			continue
		}
		id := rv.GetUser().GetID()
		if _, ok := latest[id]; !ok {
			order = append(order, id)
		}
		latest[id] = rv
	}
	var out []*gh.PullRequestReview
	for _, id := range order {
		if rv := latest[id]; rv.GetState() == reviewApproved {
			out = append(out, rv)
		}
	}
	return out
}

// Approvals returns who approves pull request #iid now: each reviewer
// whose latest review (APPROVED, CHANGES_REQUESTED or DISMISSED; comments
// do not count) is APPROVED with commit_id the current head sha, in order
// of their first review (GET .../pulls/{n} for the head, then GET
// .../pulls/{n}/reviews, every page). An approval of an older head does
// not count: the flows approve again after the head moved.
func (c *Client) Approvals(ctx context.Context, projectID, iid int64) ([]platform.User, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return nil, fmt.Errorf("reading approvals of pull request #%d: %w", iid, err)
	}
	pr, err := c.readPull(ctx, r, iid)
	if err != nil {
		return nil, fmt.Errorf("reading approvals of pull request #%d of %s: %w", iid, r, err)
	}
	rs, err := c.reviews(ctx, r, iid)
	if err != nil {
		return nil, fmt.Errorf("reading approvals of pull request #%d of %s: %w", iid, r, err)
	}
	users := []platform.User{}
	for _, rv := range latestApprovals(rs) {
		if rv.GetCommitID() == pr.GetHead().GetSHA() {
			users = append(users, toUser(rv.GetUser()))
		}
	}
	return users, nil
}

// Approve submits an APPROVE review of pull request #iid at commit sha as
// reviewer i (POST .../pulls/{n}/reviews with event APPROVE and
// commit_id, with reviewer i's own token; fixture
// api-pulls-create-review.json). GitHub accepts a review of any commit of
// the pull request, so the head is read first: when it is not sha the
// review is not sent and the error matches platform.ErrHeadMoved (Status
// 0). GitHub refuses an approval by the author, 422 "Can not approve your
// own pull request", which matches platform.ErrForbidden. A second
// approval by the same reviewer is accepted by GitHub (one more review).
func (c *Client) Approve(ctx context.Context, reviewer int, projectID, iid int64, sha string) error {
	if reviewer < 0 || reviewer >= len(c.reviewers) {
		return fmt.Errorf("approving pull request #%d: only %d reviewers configured", iid, len(c.reviewers))
	}
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return fmt.Errorf("approving pull request #%d: %w", iid, err)
	}
	pr, err := c.readPull(ctx, r, iid)
	if err != nil {
		return fmt.Errorf("approving pull request #%d of %s: %w", iid, r, err)
	}
	path := fmt.Sprintf("/repos/%s/pulls/%d/reviews", r, iid)
	if head := pr.GetHead().GetSHA(); head != sha {
		return fmt.Errorf("approving pull request #%d of %s as reviewer %d: %w", iid, r, reviewer,
			notSent(http.MethodPost, path, platform.ErrHeadMoved, "head is %s, not %s: review not sent", head, sha))
	}
	_, err = call(ctx, c, epReviewCreate, func(ctx context.Context) (*gh.PullRequestReview, *gh.Response, error) {
		return c.reviewers[reviewer].PullRequests.CreateReview(ctx, r.owner, r.name, int(iid), &gh.PullRequestReviewRequest{
			CommitID: new(sha), Event: new("APPROVE"),
		})
	})
	if err != nil {
		return fmt.Errorf("approving pull request #%d of %s as reviewer %d: %w", iid, r, reviewer, err)
	}
	return nil
}

// Unapprove dismisses reviewer i's approval of pull request #iid: its
// latest review when that is APPROVED (PUT
// .../pulls/{n}/reviews/{id}/dismissals, as the robot, which needs write
// access). No approval by reviewer i is a no-op.
func (c *Client) Unapprove(ctx context.Context, reviewer int, projectID, iid int64) error {
	u, err := c.Reviewer(ctx, reviewer)
	if err != nil {
		return fmt.Errorf("unapproving pull request #%d: %w", iid, err)
	}
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return fmt.Errorf("unapproving pull request #%d: %w", iid, err)
	}
	rs, err := c.reviews(ctx, r, iid)
	if err != nil {
		return fmt.Errorf("unapproving pull request #%d of %s: %w", iid, r, err)
	}
	for _, rv := range latestApprovals(rs) {
		if rv.GetUser().GetID() != u.ID {
			continue
		}
		_, err := call(ctx, c, epReviewDismiss, func(ctx context.Context) (*gh.PullRequestReview, *gh.Response, error) {
			return c.robot.PullRequests.DismissReview(ctx, r.owner, r.name, int(iid), rv.GetID(),
				gh.PullRequestDismissReviewRequest{Message: "changebot: approval withdrawn"})
		})
		if err != nil {
			return fmt.Errorf("unapproving pull request #%d of %s as reviewer %d: %w", iid, r, reviewer, err)
		}
	}
	return nil
}

// Merge merges pull request #iid at once (PUT .../pulls/{n}/merge with sha
// and merge_method; fixtures api-pulls-merge-request.json,
// api-pulls-merge-200.json). The method is the repository's (Project:
// merge when merge commits are allowed, else squash, else rebase); with
// p.Squash and squash allowed, squash. p.SHA is required: GitHub answers
// 409 "Head branch was modified. Review and try the merge again." when the
// head moved (platform.ErrHeadMoved, fixture api-pulls-merge-409.json) and
// 405 "Pull Request is not mergeable" when it cannot merge now
// (platform.ErrNotMergeable, fixture api-pulls-merge-405.json). On success
// the pull request is read again and returned (state merged,
// MergeCommitSHA set).
func (c *Client) Merge(ctx context.Context, projectID, iid int64, p platform.MergeParams) (platform.MergeRequest, error) {
	if p.SHA == "" {
		return platform.MergeRequest{}, fmt.Errorf("merging pull request #%d: sha is empty", iid)
	}
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("merging pull request #%d: %w", iid, err)
	}
	proj, err := c.Project(ctx, r.String())
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("merging pull request #%d: %w", iid, err)
	}
	method := proj.MergeMethod
	if p.Squash && proj.SquashOption != "never" {
		method = MethodSquash
	}
	opts := &gh.PullRequestOptions{SHA: p.SHA, MergeMethod: method}
	_, err = call(ctx, c, epPullMerge, func(ctx context.Context) (*gh.PullRequestMergeResult, *gh.Response, error) {
		return c.robot.PullRequests.Merge(ctx, r.owner, r.name, int(iid), p.CommitMessage, opts)
	})
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("merging pull request #%d of %s: %w", iid, r, err)
	}
	pr, err := c.readPull(ctx, r, iid)
	if err != nil {
		return platform.MergeRequest{}, fmt.Errorf("reading pull request #%d of %s after its merge: %w", iid, r, err)
	}
	return toMergeRequest(pr, projectID, nil), nil
}

// Rebase brings pull request #iid up to date with its base: PUT
// .../pulls/{n}/update-branch with expected_head_sha the head just read
// (202 "Updating pull request branch.", fixtures
// api-pulls-update-branch-request.json, api-pulls-update-branch-202.json).
// GitHub merges the base into the head branch asynchronously (not a
// rebase: the head gets a merge commit); poll MergeRequest until the head
// moves (nothing else says the update is done). A head that moved in between answers 422, which matches
// platform.ErrHeadMoved; a conflict between base and head 422 "merge
// conflict between base and head", which matches platform.ErrConflict (the
// pull request then shows mergeable_state dirty: HasConflicts).
func (c *Client) Rebase(ctx context.Context, projectID, iid int64) error {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return fmt.Errorf("updating pull request #%d: %w", iid, err)
	}
	pr, err := c.readPull(ctx, r, iid)
	if err != nil {
		return fmt.Errorf("updating pull request #%d of %s: %w", iid, r, err)
	}
	head := pr.GetHead().GetSHA()
	_, err = call(ctx, c, epPullUpdateBranch, func(ctx context.Context) (*gh.PullRequestBranchUpdateResponse, *gh.Response, error) {
		return c.robot.PullRequests.UpdateBranch(ctx, r.owner, r.name, int(iid), gh.UpdatePullRequestBranchRequest{ExpectedHeadSHA: new(head)})
	})
	if err != nil {
		return fmt.Errorf("updating pull request #%d of %s: %w", iid, r, err)
	}
	return nil
}

// errNoHead reports a pull request without a head sha.
var errNoHead = errors.New("pull request has no head sha")
