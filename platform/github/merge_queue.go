package github

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v93/github"

	"changebot/platform"
)

// GitHub's merge queue (issue 22 point 4) through its GraphQL API, the
// only API that enqueues: a branch that requires a merge queue refuses
// the REST merge (405 "Changes must be made through the merge queue").
// The calls are small typed POST /graphql requests sent through call, so
// they share the REST calls' transport: authentication, the account's
// rate-limit wait, the call budget, retries and metrics. No GraphQL
// client library is used for three fixed documents.

// GraphQL documents (docs.github.com GraphQL reference: Repository.mergeQueue,
// PullRequest.mergeQueueEntry, Mutation.enqueuePullRequest).
const (
	gqlMergeQueue = `query($owner: String!, $name: String!, $branch: String!) {
  repository(owner: $owner, name: $name) { mergeQueue(branch: $branch) { id } }
}`
	gqlQueueEntry = `query($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) { merged state mergeQueueEntry { state position } }
  }
}`
	gqlEnqueue = `mutation($input: EnqueuePullRequestInput!) {
  enqueuePullRequest(input: $input) { mergeQueueEntry { state position } }
}`
)

// Endpoint names of the GraphQL calls (Config.ObserveFunc, logs).
const (
	epMergeQueueGet  = "graphql_merge_queue_get"
	epQueueEntryGet  = "graphql_merge_queue_entry_get"
	epPullRequestEnq = "graphql_enqueue_pull_request"
)

// gqlError is one entry of a GraphQL answer's errors: {"type", "path",
// "message"}, for example NOT_FOUND "Could not resolve to a Repository
// with the name 'o/r'.".
type gqlError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type gqlAnswer[T any] struct {
	Data   *T         `json:"data"`
	Errors []gqlError `json:"errors"`
}

// graphqlPath is the GraphQL endpoint relative to the REST root:
// https://api.github.com/graphql, and /api/graphql on GitHub Enterprise
// Server (whose REST root is /api/v3/).
func (c *Client) graphqlPath() string {
	if strings.HasSuffix(c.basePath, "/v3/") {
		return "../graphql"
	}
	return "graphql"
}

// graphQL sends query with vars as the robot and decodes data into T. A
// non-2xx answer is a *platform.Error as for REST (5xx and rate limits
// transient); an answer with errors is a *platform.Error too (gqlRefusal).
func graphQL[T any](ctx context.Context, c *Client, endpoint, query string, vars map[string]any) (T, error) {
	var zero T
	ans, err := call(ctx, c, endpoint, func(ctx context.Context) (*gqlAnswer[T], *gh.Response, error) {
		req, err := c.robot.NewRequest(ctx, http.MethodPost, c.graphqlPath(), map[string]any{"query": query, "variables": vars})
		if err != nil {
			return nil, nil, err
		}
		var out gqlAnswer[T]
		resp, err := c.robot.Do(req, &out)
		return &out, resp, err
	})
	if err != nil {
		return zero, err
	}
	if len(ans.Errors) > 0 {
		return zero, gqlRefusal(ans.Errors[0])
	}
	if ans.Data == nil {
		return zero, &platform.Error{Method: http.MethodPost, Path: "/graphql", Status: http.StatusBadGateway, Kind: platform.ErrUnavailable, Message: "GraphQL answered no data and no errors"}
	}
	return *ans.Data, nil
}

// gqlRefusal turns a GraphQL error (HTTP 200) into a *platform.Error whose
// Status is the REST status of the same meaning, so that the flows decide
// on it as on REST answers: NOT_FOUND 404 ErrNotFound, FORBIDDEN 403
// ErrForbidden, RATE_LIMITED 429 ErrRateLimited (transient), a message
// saying the head "was modified" 409 ErrHeadMoved (the REST merge's 409
// words; GraphQL's merge answered "Base branch was modified. Review and
// try the merge again.", FACTS of the fixtures), anything else 422
// ErrNotMergeable with GitHub's message.
func gqlRefusal(e gqlError) error {
	pe := &platform.Error{Method: http.MethodPost, Path: "/graphql", Message: truncate(e.Type + ": " + e.Message)}
	switch {
	case e.Type == "NOT_FOUND":
		pe.Status, pe.Kind = http.StatusNotFound, platform.ErrNotFound
	case e.Type == "FORBIDDEN":
		pe.Status, pe.Kind = http.StatusForbidden, platform.ErrForbidden
	case e.Type == "RATE_LIMITED":
		pe.Status, pe.Kind, pe.RetryAfter = http.StatusTooManyRequests, platform.ErrRateLimited, DefaultSecondaryWait
	case strings.Contains(strings.ToLower(e.Message), "was modified"):
		pe.Status, pe.Kind = http.StatusConflict, platform.ErrHeadMoved
	default:
		pe.Status, pe.Kind = http.StatusUnprocessableEntity, platform.ErrNotMergeable
	}
	return pe
}

func truncate(s string) string {
	if len(s) > maxMessage {
		return s[:maxMessage]
	}
	return s
}

// MergeQueue reports whether branch of the repository requires a merge
// queue: GraphQL repository.mergeQueue(branch:) is non-null
// (docs.github.com GraphQL reference, Repository.mergeQueue: "The merge
// queue for a specified branch, otherwise null"). It sees a queue required
// by a classic branch protection rule as well as by a ruleset, which the
// REST GET .../rules/branches/{branch} (rulesets only) would miss. One
// call; the flows keep the answer per branch (flows.Engine's reads).
func (c *Client) MergeQueue(ctx context.Context, projectID int64, branch string) (bool, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return false, fmt.Errorf("reading whether %q requires a merge queue: %w", branch, err)
	}
	type answer struct {
		Repository struct {
			MergeQueue *struct {
				ID string `json:"id"`
			} `json:"mergeQueue"`
		} `json:"repository"`
	}
	a, err := graphQL[answer](ctx, c, epMergeQueueGet, gqlMergeQueue, map[string]any{"owner": r.owner, "name": r.name, "branch": branch})
	if err != nil {
		return false, fmt.Errorf("reading whether %s of %s requires a merge queue: %w", branch, r, err)
	}
	return a.Repository.MergeQueue != nil, nil
}

// AddToMergeTrain enqueues pull request #iid in the merge queue of its
// base branch: GraphQL enqueuePullRequest(input: {pullRequestId,
// expectedHeadOid: sha}) (docs.github.com GraphQL reference, Mutation
// enqueuePullRequest), after a REST read of the pull request for its node
// id. A head that is no longer sha is refused (ErrHeadMoved); a pull
// request GitHub will not enqueue (closed, checks failing, no queue on the
// branch) is ErrNotMergeable with GitHub's message. squash is ignored: the
// queue merges with the method its branch rule sets.
func (c *Client) AddToMergeTrain(ctx context.Context, projectID, iid int64, sha string, squash bool) error {
	if sha == "" {
		return fmt.Errorf("enqueuing pull request #%d: sha is empty", iid)
	}
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return fmt.Errorf("enqueuing pull request #%d: %w", iid, err)
	}
	pr, err := c.readPull(ctx, r, iid)
	if err != nil {
		return fmt.Errorf("enqueuing pull request #%d of %s: %w", iid, r, err)
	}
	type answer struct {
		EnqueuePullRequest struct {
			MergeQueueEntry *struct {
				State string `json:"state"`
			} `json:"mergeQueueEntry"`
		} `json:"enqueuePullRequest"`
	}
	input := map[string]any{"pullRequestId": pr.GetNodeID(), "expectedHeadOid": sha}
	if _, err := graphQL[answer](ctx, c, epPullRequestEnq, gqlEnqueue, map[string]any{"input": input}); err != nil {
		return fmt.Errorf("enqueuing pull request #%d of %s at %.12s: %w", iid, r, sha, err)
	}
	return nil
}

// MergeTrainCar reads pull request #iid's merge queue entry (GraphQL
// pullRequest.mergeQueueEntry {state position}; docs.github.com
// MergeQueueEntryState: QUEUED, AWAITING_CHECKS, MERGEABLE, UNMERGEABLE,
// LOCKED) as a platform.TrainCar: Status is the state in lower case, or
// "merged" once the pull request merged; PipelineStatus is the merge
// group's checks in the platform's words (AWAITING_CHECKS running,
// MERGEABLE success, UNMERGEABLE failed, else pending). No entry on a pull
// request that did not merge (GitHub removed it: its merge group's checks
// failed, it conflicted, or a person dequeued it) is platform.ErrNotFound,
// as GitLab's 404 for a merge request off its train.
func (c *Client) MergeTrainCar(ctx context.Context, projectID, iid int64) (platform.TrainCar, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return platform.TrainCar{}, fmt.Errorf("reading the merge queue entry of pull request #%d: %w", iid, err)
	}
	type answer struct {
		Repository struct {
			PullRequest struct {
				Merged          bool   `json:"merged"`
				State           string `json:"state"`
				MergeQueueEntry *struct {
					State    string `json:"state"`
					Position int    `json:"position"`
				} `json:"mergeQueueEntry"`
			} `json:"pullRequest"`
		} `json:"repository"`
	}
	a, err := graphQL[answer](ctx, c, epQueueEntryGet, gqlQueueEntry, map[string]any{"owner": r.owner, "name": r.name, "number": iid})
	if err != nil {
		return platform.TrainCar{}, fmt.Errorf("reading the merge queue entry of pull request #%d of %s: %w", iid, r, err)
	}
	pr := a.Repository.PullRequest
	switch {
	case pr.Merged:
		return platform.TrainCar{Status: "merged", PipelineStatus: platform.PipelineSuccess}, nil
	case pr.MergeQueueEntry == nil:
		return platform.TrainCar{}, fmt.Errorf("reading the merge queue entry of pull request #%d of %s: %w", iid, r,
			&platform.Error{Method: http.MethodPost, Path: "/graphql", Status: http.StatusNotFound, Kind: platform.ErrNotFound, Message: "the pull request is not in a merge queue"})
	}
	car := platform.TrainCar{Status: strings.ToLower(pr.MergeQueueEntry.State), PipelineStatus: "pending"}
	switch pr.MergeQueueEntry.State {
	case "AWAITING_CHECKS":
		car.PipelineStatus = "running"
	case "MERGEABLE":
		car.PipelineStatus = platform.PipelineSuccess
	case "UNMERGEABLE":
		car.PipelineStatus = platform.PipelineFailed
	}
	return car, nil
}
