package flowtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/github"
	"changebot/platform/gitlab"
	"changebot/store"
)

// ToMROpened submits p and drives it to CREATE_MR_OPENED: the approval is
// requested and approved first when p.ApprovalFirst. The MR pipeline's
// webhooks are left pending (see Webhooks).
func (h *Harness) ToMROpened(t testing.TB, p flows.SubmitParams) store.Operation {
	t.Helper()
	op := h.Submit(t, p)
	h.WorkUntilIdle(t)
	if p.ApprovalFirst {
		h.RequireStep(t, op.ID, rules.ApprovalSent)
		if res := h.Decide(t, op.ID, rules.DecisionApproved); res != rules.ResultAccepted {
			t.Fatalf("approving %s: %s", op.ID, res)
		}
		h.WorkUntilIdle(t)
	}
	return h.RequireStep(t, op.ID, rules.CreateMROpened)
}

// ToMerged submits p and drives it to HANDLE_MERGED through delivered
// webhooks (approving it when the approval comes after the MR). The deploy
// pipeline's webhooks are left pending.
func (h *Harness) ToMerged(t testing.TB, p flows.SubmitParams) store.Operation {
	t.Helper()
	op := h.ToMROpened(t, p)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	if !p.ApprovalFirst {
		h.RequireStep(t, op.ID, rules.ApprovalSent)
		if res := h.Decide(t, op.ID, rules.DecisionApproved); res != rules.ResultAccepted {
			t.Fatalf("approving %s: %s", op.ID, res)
		}
		h.WorkUntilIdle(t)
	}
	return h.RequireStep(t, op.ID, rules.HandleMerged)
}

// RunUntil advances the clock job by job (as RunFor) until operation id is
// at step, and fails the test if it is not there within limit of harness
// time. It returns the operation.
func (h *Harness) RunUntil(t testing.TB, id string, step rules.StepCode, limit time.Duration) store.Operation {
	t.Helper()
	end := h.Now().Add(limit)
	h.WorkUntilIdle(t)
	for rules.StepCode(h.Op(t, id).Step) != step {
		next, ok := h.NextDue(t)
		if !ok || h.Now().Add(next).After(end) {
			break
		}
		h.Advance(next)
		h.WorkUntilIdle(t)
	}
	return h.RequireStep(t, id, step)
}

// ClientAs returns a GitLab client acting as username (any user the
// harness created: Robot, Requester, "reviewer1", ...), for what people do
// in GitLab during a test: push to the change's branch, merge or close its
// MR. Each of its requests first settles the fake GitLab (Settle), as every
// job does: a person acts at a moment of harness time, and the fake's work
// of no duration that an earlier act started (the pipeline a push or
// FinishRebase starts, which the fake runs on real-time timers; its hooks)
// is done by then. Without it a merge right after FinishRebase raced those
// timers and GitLab answered 405 (detailed_merge_status ci_still_running).
func (h *Harness) ClientAs(t testing.TB, username string) *gitlab.Client {
	t.Helper()
	c, err := gitlab.New(gitlab.Config{BaseURL: h.GitLab.URL(), Token: username + "-token", RetryMax: -1,
		HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: settledTransport{fake: h.GitLab}}})
	if err != nil {
		t.Fatalf("building a GitLab client for %s: %v", username, err)
	}
	return c
}

// settledTransport waits until the fake GitLab or GitHub is idle before
// each request (ClientAs, GitHubClientAs).
type settledTransport struct {
	fake interface{ WaitIdle(context.Context) error }
}

// settledBase is settledTransport's own connection pool: http.DefaultTransport
// has its idle connections closed by every httptest.Server.Close in the
// process, which fails a parallel test's call that was reusing one.
var settledBase = platform.OwnHTTPClient(nil, 0).Transport

// RoundTrip implements http.RoundTripper.
func (s settledTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), 10*time.Second)
	defer cancel()
	if err := s.fake.WaitIdle(ctx); err != nil {
		return nil, err
	}
	return settledBase.RoundTrip(req)
}

// Retarget has username (a Developer, such as Requester) change the target
// branch of operation id's merge request to branch, creating branch from
// the default branch first when it does not exist, as a person does in
// GitLab: PUT /projects/:id/merge_requests/:iid with target_branch
// (doc/api/merge_requests.md "Update MR"). GitLab answers 200 and sends the
// Merge Request Hook "update" with changes.target_branch, which is left
// pending (see Webhooks). On a GitHub harness the person edits the pull
// request's base instead (githubfake.Server.SetPullBase: the pull_request
// "edited" webhook with changes.base, left pending too).
func (h *Harness) Retarget(t testing.TB, id, branch, username string) {
	t.Helper()
	op := h.Op(t, id)
	ctx := context.Background()
	if h.GitHub != nil {
		if h.GitHub.BranchSHA(op.ProjectID, branch) == "" {
			if _, err := h.GitHubClientAs(t, username).CreateBranch(ctx, op.ProjectID, branch, "main"); err != nil {
				t.Fatalf("creating branch %s: %v", branch, err)
			}
		}
		h.GitHub.SetPullBase(op.ProjectID, op.MRIID, branch, username)
		h.Settle(t)
		return
	}
	if !h.GitLab.HasBranch(op.ProjectID, branch) {
		if _, err := h.ClientAs(t, username).CreateBranch(ctx, op.ProjectID, branch, "main"); err != nil {
			t.Fatalf("creating branch %s: %v", branch, err)
		}
	}
	body, err := json.Marshal(map[string]string{"target_branch": branch})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut,
		fmt.Sprintf("%s/api/v4/projects/%d/merge_requests/%d", h.GitLab.URL(), op.ProjectID, op.MRIID), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("PRIVATE-TOKEN", username+"-token")
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Timeout: 30 * time.Second, Transport: settledTransport{fake: h.GitLab}}).Do(req)
	if err != nil {
		t.Fatalf("retargeting !%d onto %s: %v", op.MRIID, branch, err)
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("retargeting !%d onto %s: GitLab answered %d %s", op.MRIID, branch, res.StatusCode, b)
	}
	h.Settle(t)
}

// GitHubClientAs is ClientAs on a GitHub harness: a GitHub client acting
// as login (Robot, Requester, "reviewer1", ...), each request settling the
// fake GitHub first.
func (h *Harness) GitHubClientAs(t testing.TB, login string) *github.Client {
	t.Helper()
	if h.GitHub == nil {
		t.Fatalf("GitHubClientAs on a %s harness", h.Platform)
	}
	c, err := github.New(github.Config{BaseURL: h.GitHub.URL(), Token: login + "-token", RetryMax: -1, MergeableReads: -1,
		HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: settledTransport{fake: h.GitHub}}})
	if err != nil {
		t.Fatalf("building a GitHub client for %s: %v", login, err)
	}
	return c
}
