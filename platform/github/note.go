package github

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v93/github"

	"changebot/platform"
)

// CreateNote comments on pull request #iid as the robot: a conversation
// comment is an issue comment (POST /repos/{o}/{r}/issues/{n}/comments,
// 201; fixtures api-issues-comment-request.json, api-issues-comment.json).
// GitHub has no quick actions: the body is kept as written. Comments count
// towards GitHub's content-creation secondary limit (80 a minute).
func (c *Client) CreateNote(ctx context.Context, projectID, iid int64, body string) (platform.Note, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.Note{}, fmt.Errorf("commenting on pull request #%d: %w", iid, err)
	}
	n, err := call(ctx, c, epCommentCreate, func(ctx context.Context) (*gh.IssueComment, *gh.Response, error) {
		return c.robot.Issues.CreateComment(ctx, r.owner, r.name, int(iid), gh.IssueCommentRequest{Body: body})
	})
	if err != nil {
		return platform.Note{}, fmt.Errorf("commenting on pull request #%d of %s: %w", iid, r, err)
	}
	return toNote(n), nil
}

// UpdateNote replaces the body of comment noteID (PATCH
// /repos/{o}/{r}/issues/comments/{id}; comment ids are per repository, so
// iid only names the pull request in errors). A deleted comment matches
// platform.ErrNotFound: create a new one.
func (c *Client) UpdateNote(ctx context.Context, projectID, iid, noteID int64, body string) (platform.Note, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.Note{}, fmt.Errorf("updating comment %d on pull request #%d: %w", noteID, iid, err)
	}
	n, err := call(ctx, c, epCommentUpdate, func(ctx context.Context) (*gh.IssueComment, *gh.Response, error) {
		return c.robot.Issues.UpdateComment(ctx, r.owner, r.name, noteID, gh.IssueCommentRequest{Body: body})
	})
	if err != nil {
		return platform.Note{}, fmt.Errorf("updating comment %d on pull request #%d of %s: %w", noteID, iid, r, err)
	}
	return toNote(n), nil
}

// Note reads comment noteID of pull request #iid (GET
// /repos/{o}/{r}/issues/comments/{id}). A deleted comment, or one on
// another issue or pull request (its issue_url does not end in /<iid>),
// matches platform.ErrNotFound.
func (c *Client) Note(ctx context.Context, projectID, iid, noteID int64) (platform.Note, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.Note{}, fmt.Errorf("reading comment %d on pull request #%d: %w", noteID, iid, err)
	}
	n, err := call(ctx, c, epCommentGet, func(ctx context.Context) (*gh.IssueComment, *gh.Response, error) {
		return c.robot.Issues.GetComment(ctx, r.owner, r.name, noteID)
	})
	if err == nil && n.IssueURL != nil && !strings.HasSuffix(n.GetIssueURL(), "/"+itoa(iid)) {
		err = platform.ErrNotFound
	}
	if err != nil {
		return platform.Note{}, fmt.Errorf("reading comment %d on pull request #%d of %s: %w", noteID, iid, r, err)
	}
	return toNote(n), nil
}

// FindNote returns the oldest comment on pull request #iid authored by the
// robot (CurrentUser) whose body contains marker, scanning every page
// oldest first with per_page=100 (GET .../issues/{n}/comments, which
// GitHub answers in ascending order; fixture api-issues-list-comments.json).
// It stops at the first match. None matches platform.ErrNotFound. This is
// how the status comment is found again.
func (c *Client) FindNote(ctx context.Context, projectID, iid int64, marker string) (platform.Note, error) {
	if marker == "" {
		return platform.Note{}, errors.New("finding comment: marker is empty")
	}
	robot, err := c.CurrentUser(ctx)
	if err != nil {
		return platform.Note{}, fmt.Errorf("finding comment on pull request #%d: %w", iid, err)
	}
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.Note{}, fmt.Errorf("finding comment on pull request #%d: %w", iid, err)
	}
	opt := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: pageSize, Page: 1}}
	for range maxPages {
		cs, resp, err := callResp(ctx, c, epCommentsList, func(ctx context.Context) ([]*gh.IssueComment, *gh.Response, error) {
			return c.robot.Issues.ListComments(ctx, r.owner, r.name, int(iid), opt)
		})
		if err != nil {
			return platform.Note{}, fmt.Errorf("finding comment on pull request #%d of %s: %w", iid, r, err)
		}
		for _, n := range cs {
			if n != nil && n.GetUser().GetID() == robot.ID && strings.Contains(n.GetBody(), marker) {
				return toNote(n), nil
			}
		}
		if resp == nil || resp.NextPage == 0 || resp.NextPage <= opt.Page {
			break
		}
		opt.Page = resp.NextPage
	}
	return platform.Note{}, fmt.Errorf("finding comment on pull request #%d of %s: %w", iid, r, platform.ErrNotFound)
}
