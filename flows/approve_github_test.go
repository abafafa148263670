package flows_test

import (
	"net/http"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// TestApproveAfterRateLimitDoesNotApproveTwice: the second reviewer's
// approve is rate-limited after the first reviewer approved, so the step
// snoozes without an attempt event and runs again. That run reads the
// approvals first and approves as the second reviewer alone, on GitHub
// too, which accepts a second APPROVE review of the same commit (200, a
// duplicate review) where GitLab answers 401 "already approved". Both end
// merged.
func TestApproveAfterRateLimitDoesNotApproveTwice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		platform       string
		reviewer1Calls int
		approvalReads  int
	}{
		{platform: store.PlatformGitHub, reviewer1Calls: 1, approvalReads: 2},
		{platform: store.PlatformGitLab, reviewer1Calls: 1, approvalReads: 2},
	} {
		t.Run(tc.platform, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, &flowtest.Opts{Configure: func(c *flows.EngineConfig) { c.Platform = tc.platform }})
			h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: "/api/v4/projects/*/merge_requests/*/approve",
				User: "reviewer2", Status: http.StatusTooManyRequests, RetryAfter: "5", Times: 1})
			p := flowtest.Change("payments-api")
			p.ApprovalFirst = true
			op := h.ToMROpened(t, p)
			h.DeliverWebhooks(t)
			h.RunUntil(t, op.ID, rules.HandleMerged, 10*time.Minute)
			approves := 0
			for _, c := range h.GitLab.Calls() {
				if c.Method == http.MethodPost && c.User == "reviewer1" && matches("/api/v4/projects/*/merge_requests/*/approve", c.Path) {
					approves++
				}
			}
			if approves != tc.reviewer1Calls {
				t.Errorf("reviewer1 approve calls = %d, want %d", approves, tc.reviewer1Calls)
			}
			if n := h.GitLab.CallCount(http.MethodGet, "/api/v4/projects/*/merge_requests/*/approvals"); n != tc.approvalReads {
				t.Errorf("approvals reads = %d, want %d", n, tc.approvalReads)
			}
		})
	}
}
