package flows_test

import (
	"net/http"
	"testing"
	"time"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/github/githubfake"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// TestApproveAfterRateLimitDoesNotApproveTwice: the second reviewer's
// approve is rate-limited after the first reviewer approved, so the step
// snoozes without an attempt event and runs again. That run reads the
// approvals first and approves as the second reviewer alone, on GitHub
// too (githubfake: a secondary rate limit, 403 with Retry-After, on the
// second reviewer's review), which accepts a second APPROVE review of the
// same commit (200, a duplicate review) where GitLab answers 401 "already
// approved": there, only the read keeps the first reviewer from
// approving twice. The first run on GitLab approves without reading
// (approvalsReadFirst: no robot can have approved yet), and records before
// waiting that it approved, so the run after the wait reads: one read on
// GitLab, one per run on GitHub. Both end merged.
func TestApproveAfterRateLimitDoesNotApproveTwice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		platform string
		limit    func(h *flowtest.Harness)
		// approves counts the approve writes of login; reads the approval
		// reads.
		approves func(h *flowtest.Harness, login string) int
		reads    func(h *flowtest.Harness) int
		// wantReads is how many approval reads the two runs make.
		wantReads int
	}{
		{platform: store.PlatformGitHub,
			limit: func(h *flowtest.Harness) {
				f := githubfake.SecondaryRateLimit(http.MethodPost, "/repos/*/*/pulls/*/reviews", 1, "5")
				f.Login = "reviewer2"
				h.GitHub.InjectFault(f)
			},
			approves: func(h *flowtest.Harness, login string) int {
				n := 0
				for _, c := range h.GitHub.Calls() {
					if c.Method == http.MethodPost && c.Login == login && matches("/repos/*/*/pulls/*/reviews", c.Path) {
						n++
					}
				}
				return n
			},
			reads: func(h *flowtest.Harness) int { return h.GitHub.CallCount(http.MethodGet, "/repos/*/*/pulls/*/reviews") }, wantReads: 2},
		{platform: store.PlatformGitLab,
			limit: func(h *flowtest.Harness) {
				h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: "/api/v4/projects/*/merge_requests/*/approve",
					User: "reviewer2", Status: http.StatusTooManyRequests, RetryAfter: "5", Times: 1})
			},
			approves: func(h *flowtest.Harness, login string) int {
				n := 0
				for _, c := range h.GitLab.Calls() {
					if c.Method == http.MethodPost && c.User == login && matches("/api/v4/projects/*/merge_requests/*/approve", c.Path) {
						n++
					}
				}
				return n
			},
			reads: func(h *flowtest.Harness) int {
				return h.GitLab.CallCount(http.MethodGet, "/api/v4/projects/*/merge_requests/*/approvals")
			}, wantReads: 1},
	} {
		t.Run(tc.platform, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, &flowtest.Opts{Platform: tc.platform})
			tc.limit(h)
			p := flowtest.Change("payments-api")
			p.ApprovalFirst = true
			op := h.ToMROpened(t, p)
			h.DeliverWebhooks(t)
			h.RunUntil(t, op.ID, rules.HandleMerged, 10*time.Minute)
			if n := tc.approves(h, "reviewer1"); n != 1 {
				t.Errorf("reviewer1 approve calls = %d, want 1", n)
			}
			if n := tc.approves(h, "reviewer2"); n != 2 {
				t.Errorf("reviewer2 approve calls = %d, want 2 (the limited one and the one after the wait)", n)
			}
			if n := tc.reads(h); n != tc.wantReads {
				t.Errorf("approval reads = %d, want %d", n, tc.wantReads)
			}
		})
	}
}
