package flows_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
)

// TestApprove401ReadsTheApprovalsWithinTheBudget (issue 9 defect 13):
// GitLab answers 401 both to "already approved" and to "not allowed", so
// after a 401 on approve the approvals are read; when that read fails too,
// it is retried within the approve budget instead of ending the change in
// HANDLE_REVIEWER_DENIED at once.
func TestApprove401ReadsTheApprovalsWithinTheBudget(t *testing.T) {
	t.Parallel()
	const approvals = "/api/v4/projects/*/merge_requests/*/approvals"
	const approve = "/api/v4/projects/*/merge_requests/*/approve"
	tests := []struct {
		name   string
		faults []gitlabfake.Fault
		// unreadableFor is how long the approvals stay unreadable.
		unreadableFor time.Duration
		want          rules.StepCode
		// reviewer1Approvals, when set, is how many approve calls
		// reviewer1 may make: none after the one that took effect.
		reviewer1Approvals int
	}{
		{
			name: "already approved, list unreadable for a while",
			// The approval takes effect but its answer is a 401, as GitLab
			// answers a second approval by the same user.
			faults: []gitlabfake.Fault{
				{Method: "POST", PathPattern: approve, Status: 401, Body: `{"message":"401 Unauthorized"}`, User: "reviewer1", AfterEffect: true, Times: 1},
				{Method: "GET", PathPattern: approvals, Status: 503},
			},
			unreadableFor: time.Minute,
			want:          rules.HandleMerged,
		},
		{
			// A rate-limited read is GitLab's "later", not a failure: it
			// must not use up the approve budget (found by the chaos run).
			name: "already approved, list rate-limited for longer than the budget",
			faults: []gitlabfake.Fault{
				{Method: "POST", PathPattern: approve, Status: 401, Body: `{"message":"401 Unauthorized"}`, User: "reviewer1", AfterEffect: true, Times: 1},
				{Method: "GET", PathPattern: approvals, Status: 429, RetryAfter: "60",
					Body: `{"message":{"error":"This endpoint has been requested too many times. Try again later."}}`},
			},
			unreadableFor:      30 * time.Minute,
			want:               rules.HandleMerged,
			reviewer1Approvals: 1,
		},
		{
			name: "not allowed, list readable",
			faults: []gitlabfake.Fault{
				{Method: "POST", PathPattern: approve, Status: 401, Body: `{"message":"401 Unauthorized"}`, User: "reviewer1"},
			},
			want: rules.HandleReviewerDenied,
		},
		{
			name: "401 and the list unreadable for the whole budget",
			faults: []gitlabfake.Fault{
				{Method: "POST", PathPattern: approve, Status: 401, Body: `{"message":"401 Unauthorized"}`, User: "reviewer1"},
				{Method: "GET", PathPattern: approvals, Status: 503},
			},
			unreadableFor: 3 * time.Hour,
			want:          rules.HandleFailed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, nil)
			op := h.Submit(t, flowtest.Change("payments-api"))
			h.WorkUntilIdle(t)
			h.Decide(t, op.ID, rules.DecisionApproved)
			h.WorkUntilIdle(t)
			h.RequireStep(t, op.ID, rules.CreateMROpened)
			for _, f := range tt.faults {
				h.GitLab.InjectFault(f)
			}
			h.DeliverWebhooks(t) // the pipeline passed: the handle phase starts
			h.WorkUntilIdle(t)
			if tt.unreadableFor > 0 {
				h.RunFor(t, tt.unreadableFor)
				if tt.want != rules.HandleFailed && slices.Contains(h.Steps(t, op.ID), rules.HandleReviewerDenied) {
					t.Fatalf("the change went to HANDLE_REVIEWER_DENIED while the approvals could not be read (steps %v)", h.Steps(t, op.ID))
				}
				h.GitLab.ClearFaults()
				h.RunFor(t, flowtest.Poll.LongInterval)
			}
			h.DeliverWebhooks(t)
			h.WorkUntilIdle(t)
			got := h.Steps(t, op.ID)
			if !slices.Contains(got, tt.want) {
				t.Fatalf("steps %v; want %s", got, tt.want)
			}
			if tt.want != rules.HandleReviewerDenied && slices.Contains(got, rules.HandleReviewerDenied) {
				t.Fatalf("steps %v went through HANDLE_REVIEWER_DENIED", got)
			}
			if tt.reviewer1Approvals > 0 {
				n := 0
				for _, c := range h.GitLab.Calls() {
					if c.Method == "POST" && strings.HasSuffix(c.Path, "/approve") && c.User == "reviewer1" {
						n++
					}
				}
				if n != tt.reviewer1Approvals {
					t.Fatalf("reviewer1 made %d approve calls, want %d (none after its approval took effect)", n, tt.reviewer1Approvals)
				}
			}
			if tt.want == rules.HandleFailed {
				if d := h.Op(t, op.ID).Detail; !strings.Contains(d, "approvals could not be read") {
					t.Fatalf("detail %q; want it to say the approvals could not be read", d)
				}
			}
		})
	}
}
