package flows_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
)

// A call GitLab refused is followed by a read that decides what the refusal
// means (the merge request's detailed_merge_status after a refused merge,
// the approvals after a 401 on approve). When the call budget holds that
// read back, the job runs again later: it must take up the read, never send
// the refused call again (one merge call per refusal, no approve storm;
// issue 4 points 1-2). Each case empties the robot's budget while the
// refused call is in flight, as 18 changes sharing one robot account did in
// bot.TestFailurePaths on a fast machine.

// holdAfter empties the robot's call budget while the n-th call with method
// to a path matching pattern is in flight, once, so that the robot's next
// call is held back; the budget refills by the harness clock.
func holdAfter(t *testing.T, h *flowtest.Harness, method, pattern string, n int64) {
	var seen atomic.Int64
	h.GitLab.SetBeforeCall(func(m, path string) {
		if m == method && matches(pattern, path) && seen.Add(1) == n {
			h.DrainBudget(t, 0)
		}
	})
}

func TestRefusedCallReadHeldBack(t *testing.T) {
	t.Parallel()
	approveRetries := flowtest.Poll
	approveRetries.ApproveMaxRetries = 2
	runRules(t, []rule{
		{name: "merge refused (requested changes), the read after it held: HANDLE_NOT_MERGEABLE after one merge call", want: rules.HandleNotMergeable,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.GitLab.SetMergeBlock(h.Project.ID, op.MRIID, gitlabfake.MergeBlock{DetailedMergeStatus: "requested_changes"})
				holdAfter(t, h, http.MethodPut, pathMerge, 1)
				h.DeliverWebhooks(t)
				return h.RunUntil(t, op.ID, rules.HandleNotMergeable, time.Hour).ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantDetail(t, h, id, "requested changes")
				wantCalls(t, h, http.MethodPut, pathMerge, "", false, 1)
			}},
		{name: "merge refused (409 head moved), the read after it held: the pipeline wait again, not a second merge at once", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPut, PathPattern: pathMerge, Status: http.StatusConflict,
					Body: "SHA does not match HEAD of source branch", Times: 1})
				op := h.ToMROpened(t, flowtest.Change("svc"))
				holdAfter(t, h, http.MethodPut, pathMerge, 1)
				h.DeliverWebhooks(t)
				return h.RunUntil(t, op.ID, rules.HandleMerged, time.Hour).ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantSteps(t, h, id, rules.HandleApproved, rules.HandleAwaitPipeline, rules.HandleStarted, rules.HandleApproved, rules.HandleMerged)
				if op := h.Op(t, id); op.Rounds != 1 {
					t.Fatalf("rounds %d, want 1", op.Rounds)
				}
				wantCalls(t, h, http.MethodPut, pathMerge, "", false, 2)
			}},
		{name: "approve answered 401, the approvals read after it held: HANDLE_REVIEWER_DENIED after one approve", want: rules.HandleReviewerDenied,
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: pathApprove, Status: http.StatusUnauthorized,
					User: "reviewer2"})
				op := h.ToMROpened(t, flowtest.Change("svc"))
				holdAfter(t, h, http.MethodPost, pathApprove, 2) // reviewer1's, then reviewer2's
				h.DeliverWebhooks(t)
				return h.RunUntil(t, op.ID, rules.HandleReviewerDenied, time.Hour).ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantDetail(t, h, id, "reviewer2")
				wantDetail(t, h, id, "401")
				wantCalls(t, h, http.MethodPost, pathApprove, "reviewer2", false, 1)
				wantCalls(t, h, http.MethodPut, pathMerge, "", false, 0)
			}},
		{name: "last approve failure took effect, the approvals read after it held: merged, no further approve", want: rules.HandleMerged,
			opts: &flowtest.Opts{Poll: approveRetries},
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: pathApprove, Status: http.StatusServiceUnavailable,
					User: "reviewer2", Times: 2})
				h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: pathApprove, Status: http.StatusBadGateway,
					User: "reviewer2", Times: 1, AfterEffect: true})
				op := h.ToMROpened(t, flowtest.Change("svc"))
				holdAfter(t, h, http.MethodPost, pathApprove, 4) // reviewer1's, then reviewer2's third
				h.DeliverWebhooks(t)
				return h.RunUntil(t, op.ID, rules.HandleMerged, time.Hour).ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantCalls(t, h, http.MethodPost, pathApprove, "reviewer2", false, 3)
				wantCalls(t, h, http.MethodPost, pathApprove, "reviewer1", false, 1)
			}},
	})
}
