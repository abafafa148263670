package gitlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	gl "gitlab.com/gitlab-org/api/client-go"

	"changebot/platform"
)

// Adapter names: the values of the runtime setting approval.adapter
// (settings.ApprovalAdapter) that Config.AdapterFunc returns.
const (
	// AdapterLegacy approves with the client library's approve call.
	AdapterLegacy = "legacy"
	// AdapterChecklist approves with a direct POST carrying the project's
	// approval checklist.
	AdapterChecklist = "checklist"
)

// DefaultChecklistCacheSize is how many projects' approval checklists the
// client keeps when Config.ChecklistCacheSize is zero.
const DefaultChecklistCacheSize = 256

// Approver approves merge request !iid of projectID as reviewer robot
// reviewer (0-based, in Config.ReviewerTokens order), pinned to the head sha
// (DESIGN.md §5 "Reviewer approval", issue 4 point 10). Client.Approve picks
// one implementation per call with Config.AdapterFunc; ApproverFor returns
// the one it would pick.
//
// The implementations:
//
//   - AdapterLegacy: the client library's approve, POST
//     /projects/:id/merge_requests/:iid/approve with {"sha": sha}.
//   - AdapterChecklist: the same endpoint, called directly (a request built
//     on the reviewer's client-go client, so authentication, in-client
//     retries, logging and metrics are those of every other call) with
//     {"sha": sha, "checklist": [{"id": "<item id>", "confirmed": true}, ...]},
//     confirming every item of the project's approval checklist. The items
//     come from GET /projects/:id/approval_checklist ({"items": [{"id",
//     "text"}]}), read with the reviewer's token and cached per project in
//     memory (the least recently used of Config.ChecklistCacheSize projects;
//     it is configuration, not change state, so it is never persisted). When
//     GitLab answers 422 with a body carrying "items" (the list now in force,
//     {"message": "checklist mismatch", "items": [...]}), the request is
//     rebuilt from that list and sent once more, without reading the
//     configuration endpoint again; the cache takes the list of every such
//     answer. A second 422, or a 422 without "items", is returned as it is.
//
// Errors: both implementations answer a non-2xx status as the wrapped
// *platform.Error every adapter call returns, whose Status is the real HTTP
// status of the last answer (a failed checklist read included) and whose Err
// is the client library's *gl.ErrorResponse; both are reachable with
// errors.As. So callers' handling does not depend on the adapter: 409 is a
// moved head, 401 "already approved or not allowed", 422 a refusal, 429 and
// 5xx transient. Invalid arguments (unknown reviewer, empty sha) are plain
// errors and no request is sent.
type Approver interface {
	Approve(ctx context.Context, reviewer int, projectID, iid int64, sha string) error
}

// ApproverFor returns the Approver Config.AdapterFunc selects for projectID
// now: the checklist adapter for AdapterChecklist, the legacy one for
// anything else (a nil AdapterFunc included).
func (c *Client) ApproverFor(projectID int64) Approver {
	if c.adapter != nil && c.adapter(projectID) == AdapterChecklist {
		return checklistApprover{c}
	}
	return legacyApprover{c}
}

// Approve approves merge request !iid as reviewer robot reviewer, pinned to
// sha (POST /projects/:id/merge_requests/:iid/approve, 201;
// doc/api/merge_request_approvals.md; fixture api-mr-approve.json), with the
// Approver Config.AdapterFunc selects for projectID at this call (see
// Approver for the request shapes and errors). GitLab answers 409 "SHA does
// not match HEAD of source branch: <sha>" when the head moved, and 401 both
// when this reviewer already approved and when it may not approve: after a
// 401, read Approvals to tell the two apart (DESIGN.md §5, GITLAB-FACTS.md
// §2.5).
func (c *Client) Approve(ctx context.Context, reviewer int, projectID, iid int64, sha string) error {
	return c.ApproverFor(projectID).Approve(ctx, reviewer, projectID, iid, sha)
}

// Unapprove withdraws reviewer robot reviewer's approval of merge request
// !iid (POST /projects/:id/merge_requests/:iid/unapprove, 201;
// doc/api/merge_request_approvals.md "Unapprove a merge request"). GitLab
// answers 404 when the reviewer had not approved: platform.ErrNotFound,
// which a caller withdrawing approvals treats as done.
func (c *Client) Unapprove(ctx context.Context, reviewer int, projectID, iid int64) error {
	if reviewer < 0 || reviewer >= len(c.reviewers) {
		return fmt.Errorf("unapproving merge request !%d as reviewer %d: only %d reviewers configured", iid, reviewer, len(c.reviewers))
	}
	api := c.reviewers[reviewer]
	_, err := call(ctx, c, epMergeRequestUnapprove, func(o gl.RequestOptionFunc) (struct{}, *gl.Response, error) {
		resp, err := api.MergeRequestApprovals.UnapproveMergeRequest(projectID, iid, o)
		return struct{}{}, resp, err
	})
	if err != nil {
		return fmt.Errorf("unapproving merge request !%d of project %d as reviewer %d: %w", iid, projectID, reviewer, err)
	}
	return nil
}

// reviewerAPI checks an approve call's arguments and returns the reviewer's
// client.
func (c *Client) reviewerAPI(reviewer int, iid int64, sha string) (*gl.Client, error) {
	if reviewer < 0 || reviewer >= len(c.reviewers) {
		return nil, fmt.Errorf("approving merge request !%d as reviewer %d: only %d reviewers configured", iid, reviewer, len(c.reviewers))
	}
	if sha == "" {
		return nil, fmt.Errorf("approving merge request !%d as reviewer %d: sha is empty", iid, reviewer)
	}
	return c.reviewers[reviewer], nil
}

// legacyApprover is AdapterLegacy: client-go's ApproveMergeRequest.
type legacyApprover struct{ c *Client }

// Approve implements Approver.
func (a legacyApprover) Approve(ctx context.Context, reviewer int, projectID, iid int64, sha string) error {
	api, err := a.c.reviewerAPI(reviewer, iid, sha)
	if err != nil {
		return err
	}
	_, err = call(ctx, a.c, epMergeRequestApprove, func(o gl.RequestOptionFunc) (*gl.MergeRequestApprovals, *gl.Response, error) {
		return api.MergeRequestApprovals.ApproveMergeRequest(projectID, iid, &gl.ApproveMergeRequestOptions{SHA: &sha}, o)
	})
	if err != nil {
		return fmt.Errorf("approving merge request !%d of project %d as reviewer %d: %w", iid, projectID, reviewer, err)
	}
	return nil
}

// checklistApprover is AdapterChecklist.
type checklistApprover struct{ c *Client }

// checklistItem is one entry of the approval checklist as the configuration
// endpoint and the 422 answer carry it.
type checklistItem struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// checklistConfirmation is one entry of the approve body's "checklist".
type checklistConfirmation struct {
	ID        string `json:"id"`
	Confirmed bool   `json:"confirmed"`
}

// checklistApproveBody is the body of the checklist adapter's approve call.
type checklistApproveBody struct {
	SHA       string                  `json:"sha"`
	Checklist []checklistConfirmation `json:"checklist"`
}

// Approve implements Approver.
func (a checklistApprover) Approve(ctx context.Context, reviewer int, projectID, iid int64, sha string) error {
	api, err := a.c.reviewerAPI(reviewer, iid, sha)
	if err != nil {
		return err
	}
	ids, ok := a.c.checklists.get(projectID)
	if !ok {
		if ids, err = a.readChecklist(ctx, api, projectID); err != nil {
			return fmt.Errorf("approving merge request !%d of project %d as reviewer %d: %w", iid, projectID, reviewer, err)
		}
		a.c.checklists.put(projectID, ids)
	}
	err = a.post(ctx, api, projectID, iid, sha, ids)
	if current, ok := checklistInForce(err); ok {
		a.c.checklists.put(projectID, current)
		err = a.post(ctx, api, projectID, iid, sha, current) // once: no loop on a list that keeps moving
		if current, ok := checklistInForce(err); ok {
			a.c.checklists.put(projectID, current)
		}
	}
	if err != nil {
		return fmt.Errorf("approving merge request !%d of project %d as reviewer %d: %w", iid, projectID, reviewer, err)
	}
	return nil
}

// readChecklist reads the item ids of projectID's approval checklist (GET
// /projects/:id/approval_checklist).
func (a checklistApprover) readChecklist(ctx context.Context, api *gl.Client, projectID int64) ([]string, error) {
	var out struct {
		Items []checklistItem `json:"items"`
	}
	_, err := call(ctx, a.c, epApprovalChecklistGet, func(o gl.RequestOptionFunc) (struct{}, *gl.Response, error) {
		req, err := api.NewRequest(http.MethodGet, fmt.Sprintf("projects/%d/approval_checklist", projectID), nil, []gl.RequestOptionFunc{o})
		if err != nil {
			return struct{}{}, nil, err
		}
		resp, err := api.Do(req, &out)
		return struct{}{}, resp, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the approval checklist of project %d: %w", projectID, err)
	}
	return itemIDs(out.Items), nil
}

// post sends the approve call confirming every item in ids.
func (a checklistApprover) post(ctx context.Context, api *gl.Client, projectID, iid int64, sha string, ids []string) error {
	body := checklistApproveBody{SHA: sha, Checklist: make([]checklistConfirmation, 0, len(ids))}
	for _, id := range ids {
		body.Checklist = append(body.Checklist, checklistConfirmation{ID: id, Confirmed: true})
	}
	_, err := call(ctx, a.c, epMergeRequestApproveChecklist, func(o gl.RequestOptionFunc) (struct{}, *gl.Response, error) {
		req, err := api.NewRequest(http.MethodPost, fmt.Sprintf("projects/%d/merge_requests/%d/approve", projectID, iid), body, []gl.RequestOptionFunc{o})
		if err != nil {
			return struct{}{}, nil, err
		}
		resp, err := api.Do(req, nil)
		return struct{}{}, resp, err
	})
	return err
}

// checklistInForce returns the item ids a 422 answer carries in "items" (the
// list now in force); false when err is not such an answer.
func checklistInForce(err error) ([]string, bool) {
	var pe *platform.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusUnprocessableEntity {
		return nil, false
	}
	var er *gl.ErrorResponse
	if !errors.As(err, &er) {
		return nil, false
	}
	var body struct {
		Items *[]checklistItem `json:"items"`
	}
	if json.Unmarshal(er.Body, &body) != nil || body.Items == nil {
		return nil, false
	}
	return itemIDs(*body.Items), true
}

func itemIDs(items []checklistItem) []string {
	ids := make([]string, 0, len(items))
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	return ids
}
