package gitlab

import (
	"context"
	"errors"
	"testing"
	"time"

	"changebot/platform"
)

// allKinds are the kinds a *platform.Error can match.
var allKinds = []error{
	platform.ErrNotFound, platform.ErrForbidden, platform.ErrAlreadyExists, platform.ErrHeadMoved,
	platform.ErrNotMergeable, platform.ErrConflict, platform.ErrInvalid, platform.ErrRateLimited,
	platform.ErrUnavailable,
}

// TestErrorKinds checks the translation of GitLab's answers into the
// platform's kinds, endpoint by endpoint: the same status means different
// things on different endpoints (409 on merge is a moved head, on merge
// request create an existing MR). Each answer matches exactly one kind, keeps
// its real status and GitLab's message. The bodies are GitLab's own texts
// (lib/api/*.rb, doc/api/merge_requests.md, doc/api/commits.md,
// doc/api/branches.md, doc/api/merge_request_approvals.md).
func TestErrorKinds(t *testing.T) {
	t.Parallel()
	type callFunc func(ctx context.Context, c *Client) error
	merge := func(ctx context.Context, c *Client) error {
		_, err := c.Merge(ctx, 42, 7, platform.MergeParams{SHA: "abc"})
		return err
	}
	approve := func(ctx context.Context, c *Client) error { return c.Approve(ctx, 0, 42, 7, "abc") }
	createMR := func(ctx context.Context, c *Client) error {
		_, err := c.CreateMergeRequest(ctx, 42, platform.CreateMRParams{SourceBranch: "changebot/op_1", TargetBranch: "main", Title: "t"})
		return err
	}
	createBranch := func(ctx context.Context, c *Client) error {
		_, err := c.CreateBranch(ctx, 42, "changebot/op_1", "main")
		return err
	}
	commit := func(ctx context.Context, c *Client) error {
		_, err := c.CreateCommit(ctx, 42, platform.CommitParams{Branch: "changebot/op_1", Message: "m",
			Actions: []platform.FileAction{{Action: "update", FilePath: "a.yaml", Content: "a: 1"}}})
		return err
	}
	rebase := func(ctx context.Context, c *Client) error { return c.Rebase(ctx, 42, 7) }
	readMR := func(ctx context.Context, c *Client) error {
		_, err := c.MergeRequest(ctx, 42, 7, false)
		return err
	}
	const (
		routeMerge    = "PUT /projects/42/merge_requests/7/merge"
		routeApprove  = "POST /projects/42/merge_requests/7/approve"
		routeCreateMR = "POST /projects/42/merge_requests"
		routeBranch   = "POST /projects/42/repository/branches"
		routeCommit   = "POST /projects/42/repository/commits"
		routeRebase   = "PUT /projects/42/merge_requests/7/rebase"
		routeReadMR   = "GET /projects/42/merge_requests/7"
	)
	tests := []struct {
		name   string
		route  string
		call   callFunc
		status int
		body   string
		header map[string]string
		want   error
	}{
		{name: "merge sha mismatch", route: routeMerge, call: merge, status: 409,
			body: `{"message":"SHA does not match HEAD of source branch: 5c4e7a2b"}`, want: platform.ErrHeadMoved},
		{name: "merge method not allowed", route: routeMerge, call: merge, status: 405,
			body: `{"message":"405 Method Not Allowed"}`, want: platform.ErrNotMergeable},
		{name: "merge older gitlab 406", route: routeMerge, call: merge, status: 406,
			body: `{"message":"Branch cannot be merged"}`, want: platform.ErrNotMergeable},
		{name: "merge branch cannot be merged", route: routeMerge, call: merge, status: 422,
			body: `{"message":"Branch cannot be merged"}`, want: platform.ErrNotMergeable},
		{name: "merge not allowed", route: routeMerge, call: merge, status: 401,
			body: `{"message":"401 Unauthorized"}`, want: platform.ErrForbidden},
		{name: "merge sha required", route: routeMerge, call: merge, status: 400,
			body: `{"message":"SHA must be provided when merging"}`, want: platform.ErrInvalid},
		{name: "approve sha mismatch", route: routeApprove, call: approve, status: 409,
			body: `{"message":"SHA does not match HEAD of source branch: 5c4e7a2b"}`, want: platform.ErrHeadMoved},
		{name: "approve twice or not allowed", route: routeApprove, call: approve, status: 401,
			body: `{"message":"401 Unauthorized"}`, want: platform.ErrForbidden},
		{name: "approve publish review failed", route: routeApprove, call: approve, status: 500,
			body: `{"message":"500 Failed to publish review"}`, want: platform.ErrUnavailable},
		{name: "create MR exists", route: routeCreateMR, call: createMR, status: 409,
			body: `{"message":["Another open merge request already exists for this source branch: !5"]}`, want: platform.ErrAlreadyExists},
		{name: "create MR source branch missing", route: routeCreateMR, call: createMR, status: 422,
			body: `{"message":["Source branch \"changebot/op_1\" does not exist"]}`, want: platform.ErrInvalid},
		{name: "create MR validation", route: routeCreateMR, call: createMR, status: 400,
			body: `{"message":{"title":["can't be blank"]}}`, want: platform.ErrInvalid},
		{name: "create branch exists", route: routeBranch, call: createBranch, status: 400,
			body: `{"message":"Branch already exists"}`, want: platform.ErrAlreadyExists},
		{name: "create branch invalid name", route: routeBranch, call: createBranch, status: 400,
			body: `{"message":"Branch name is invalid"}`, want: platform.ErrInvalid},
		{name: "create branch unknown ref", route: routeBranch, call: createBranch, status: 400,
			body: `{"message":"Invalid reference name: nope"}`, want: platform.ErrInvalid},
		{name: "create branch project missing", route: routeBranch, call: createBranch, status: 404,
			body: `{"message":"404 Project Not Found"}`, want: platform.ErrNotFound},
		{name: "commit file missing", route: routeCommit, call: commit, status: 400,
			body: `{"message":"A file with this name doesn't exist"}`, want: platform.ErrInvalid},
		{name: "commit protected branch", route: routeCommit, call: commit, status: 403,
			body: `{"message":"403 Forbidden - You are not allowed to push into this branch"}`, want: platform.ErrForbidden},
		{name: "rebase lock timeout", route: routeRebase, call: rebase, status: 409,
			body: `{"message":"Failed to enqueue the rebase operation, possibly due to a long-lived transaction. Try again later."}`, want: platform.ErrConflict},
		{name: "rebase cannot push", route: routeRebase, call: rebase, status: 403,
			body: `{"message":"403 Forbidden - Cannot push to source branch"}`, want: platform.ErrForbidden},
		{name: "read MR missing", route: routeReadMR, call: readMR, status: 404,
			body: `{"message":"404 Not found"}`, want: platform.ErrNotFound},
		{name: "read MR rate limited", route: routeReadMR, call: readMR, status: 429,
			body: "Retry later\n", header: map[string]string{"Retry-After": "60", "Content-Type": "text/plain"}, want: platform.ErrRateLimited},
		{name: "read MR bad gateway", route: routeReadMR, call: readMR, status: 502,
			body: "<html><body>502 Bad Gateway</body></html>", header: map[string]string{"Content-Type": "text/html"}, want: platform.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t)
			if tt.route == routeApprove {
				s.on("GET /user", answer{body: `{"id":501,"username":"reviewer-a"}`})
			}
			s.on(tt.route, answer{status: tt.status, body: tt.body, header: tt.header})
			c := newClient(t, s, func(cfg *Config) { cfg.RetryMax = -1 })
			err := tt.call(t.Context(), c)
			if err == nil {
				t.Fatal("call succeeded; want an error")
			}
			for _, k := range allKinds {
				want := errors.Is(k, tt.want)
				if got := errors.Is(err, k); got != want {
					t.Errorf("errors.Is(err, %q) = %v; want %v (err: %v)", k, got, want, err)
				}
			}
			if got := platform.StatusOf(err); got != tt.status {
				t.Errorf("StatusOf(err) = %d; want the real status %d", got, tt.status)
			}
			if transient := errors.Is(tt.want, platform.ErrRateLimited) || errors.Is(tt.want, platform.ErrUnavailable); platform.IsTransient(err) != transient || platform.IsRefused(err) == transient {
				t.Errorf("IsTransient = %v, IsRefused = %v; want transient %v", platform.IsTransient(err), platform.IsRefused(err), transient)
			}
			if errors.Is(tt.want, platform.ErrRateLimited) && platform.RetryAfterOf(err) != time.Minute {
				t.Errorf("RetryAfterOf(err) = %v; want 1m0s", platform.RetryAfterOf(err))
			}
		})
	}
}

// TestKindOf pins the meaning of a bare status, used when the endpoint gives
// it no more specific one (and by adapters such as platform/approval that
// set no Kind).
func TestKindOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		want   error
	}{
		{200, nil}, {304, nil}, {400, platform.ErrInvalid}, {401, platform.ErrForbidden}, {403, platform.ErrForbidden},
		{404, platform.ErrNotFound}, {405, platform.ErrInvalid}, {409, platform.ErrConflict}, {422, platform.ErrInvalid},
		{429, platform.ErrRateLimited}, {500, platform.ErrUnavailable}, {503, platform.ErrUnavailable},
	}
	for _, tt := range tests {
		if got := platform.KindOf(tt.status); !errors.Is(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Errorf("KindOf(%d) = %v; want %v", tt.status, got, tt.want)
		}
		err := &platform.Error{Status: tt.status}
		if tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("errors.Is(&Error{Status: %d}, %v) = false", tt.status, tt.want)
		}
	}
}
