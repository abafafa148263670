package flows_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// operator is who comments /resume in these cases (the command layer
// checks the role; flows acts for whoever it is given).
var operator = rules.ActionParams{Actor: "olivia", Source: "command:1", Command: string(rules.ActionResume)}

// reopenMR reopens the change's MR as person in GitLab (PUT
// .../merge_requests/:iid?state_event=reopen).
func reopenMR(t *testing.T, h *flowtest.Harness, id, person string) {
	t.Helper()
	op := h.Op(t, id)
	u := fmt.Sprintf("%s/api/v4/projects/%d/merge_requests/%d?state_event=reopen", h.GitLab.URL(), op.ProjectID, op.MRIID)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPut, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("PRIVATE-TOKEN", person+"-token")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%s reopening !%d: %d", person, op.MRIID, res.StatusCode)
	}
	if mr := h.MR(t, id); mr.State != platform.MRStateOpened {
		t.Fatalf("MR state %s after the reopen", mr.State)
	}
}

// closeByPerson closes the change's MR as the requester and delivers the
// close hook: the change is then MR_CLOSED.
func closeByPerson(t *testing.T, h *flowtest.Harness, id string) {
	t.Helper()
	if _, err := h.ClientAs(t, flowtest.Requester).CloseMergeRequest(context.Background(), h.Project.ID, h.Op(t, id).MRIID); err != nil {
		t.Fatal(err)
	}
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.RequireStep(t, id, rules.ClosedByPerson)
}

// resume is an operator's /resume; it returns the engine's error.
func resume(h *flowtest.Harness, id string) error {
	_, err := h.Engine.Act(context.Background(), id, rules.ActionResume, operator)
	return err
}

// wantRefused asserts err is a refusal whose reason contains part.
func wantRefused(t *testing.T, err error, part string) {
	t.Helper()
	if !errors.Is(err, rules.ErrNotApplicable) || !strings.Contains(err.Error(), part) {
		t.Fatalf("/resume answered %v, want a refusal saying %q", err, part)
	}
}

// callsSince counts gitlabfake calls from index from on with method and
// path by user ("" any), answered below 300.
func callsSince(h *flowtest.Harness, from int, method, pattern, user string) int {
	n := 0
	for _, c := range h.GitLab.Calls()[from:] {
		if c.Method == method && matches(pattern, c.Path) && (user == "" || c.User == user) && c.Status < 300 {
			n++
		}
	}
	return n
}

// closedAfterApprovals drives a change (approval first) until both
// reviewer robots approved and GitLab keeps checking mergeability past the
// deadline (HANDLE_MERGE_PENDING), then a person closes the MR.
func closedAfterApprovals(t *testing.T, h *flowtest.Harness) store.Operation {
	t.Helper()
	op := h.ToMROpened(t, flowtest.Change("svc"))
	h.GitLab.SetMergeBlock(h.Project.ID, op.MRIID, gitlabfake.MergeBlock{DetailedMergeStatus: "checking"})
	h.DeliverWebhooks(t)
	h.RunUntil(t, op.ID, rules.HandleMergePending, time.Hour)
	if n := len(h.MR(t, op.ID).Approvals); n != 2 {
		t.Fatalf("%d approvals before the close, want the 2 reviewer robots'", n)
	}
	closeByPerson(t, h, op.ID)
	h.GitLab.SetMergeBlock(h.Project.ID, op.MRIID, gitlabfake.MergeBlock{})
	return op
}

// TestResumeAfterPersonClosed is issue 10 point 1's way back: a change a
// person stopped by closing its MR is continued by an operator's /resume
// only once the MR is reopened, only with a pipeline that passed on the
// current head after the resume and approvals given afresh for that head;
// a reopen alone moves nothing, and a newer change on the binding wins.
func TestResumeAfterPersonClosed(t *testing.T) {
	t.Parallel()
	inPipelineWait := func(t *testing.T, h *flowtest.Harness) store.Operation {
		op := h.ToMROpened(t, flowtest.Change("svc"))
		h.TakeWebhooks(t) // the pipeline's result arrives after the close
		closeByPerson(t, h, op.ID)
		return op
	}
	gitlabApprovals := &flowtest.Opts{Configure: func(cfg *flows.EngineConfig) {
		cfg.ApprovalPolicyFunc = func(string) flows.ApprovalPolicy {
			return flows.ApprovalPolicy{Provider: rules.ProviderGitLab, Approvers: []string{"carol", "dave"}, Required: 2}
		}
	}}
	runRules(t, []rule{
		{name: "still closed: refused naming the MR, nothing moves, nothing written", want: rules.ClosedByPerson,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := inPipelineWait(t, h)
				from := len(h.GitLab.Calls())
				wantRefused(t, resume(h, op.ID), fmt.Sprintf("reopen !%d", op.MRIID))
				h.RunFor(t, time.Hour)
				if w := robotWrites(h, from); len(w) > 0 {
					t.Fatalf("robot writes after a refused /resume: %v", w)
				}
				if n := callsSince(h, from, http.MethodPost, pathPipeline, ""); n != 0 {
					t.Fatalf("%d pipelines created by a refused /resume", n)
				}
				wantBinding(t, h, op.ID, store.StatusClosed)
				return op.ID
			}},
		{name: "a reopen alone moves nothing, also with its hook, polls and reconciler passes", want: rules.ClosedByPerson,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := inPipelineWait(t, h)
				from := len(h.GitLab.Calls())
				reopenMR(t, h, op.ID, flowtest.Requester)
				if hooks := h.DeliverWebhooks(t); !strings.Contains(flowtest.Describe(hooks), "reopen") {
					t.Fatalf("no reopen hook: %s", flowtest.Describe(hooks))
				}
				for range 3 {
					h.RunFor(t, 10*time.Minute)
					findByReconciler(t, h)
				}
				if w := robotWrites(h, from); len(w) > 0 {
					t.Fatalf("robot writes after the reopen: %v", w)
				}
				wantBinding(t, h, op.ID, store.StatusClosed)
				return op.ID
			}},
		{name: "reopened: a new pipeline passes on the head, the robots approve it, VALIDATED", want: rules.CalledBack,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := inPipelineWait(t, h)
				reopenMR(t, h, op.ID, flowtest.Requester)
				h.DeliverWebhooks(t)
				from := len(h.GitLab.Calls())
				if err := resume(h, op.ID); err != nil {
					t.Fatalf("/resume: %v", err)
				}
				h.RequireStep(t, op.ID, rules.CreateMROpened)
				wantBinding(t, h, op.ID, store.StatusMRCreating)
				if n := callsSince(h, from, http.MethodPost, pathPipeline, flowtest.Robot); n != 1 {
					t.Fatalf("%d pipelines created by /resume, want 1", n)
				}
				h.DeliverWebhooks(t)
				got := h.RunUntil(t, op.ID, rules.CalledBack, time.Hour)
				head := h.MR(t, op.ID).SHA
				if got.HeadSHA != head {
					t.Fatalf("head %s, want the MR's %s", got.HeadSHA, head)
				}
				for _, r := range []string{"reviewer1", "reviewer2"} {
					if n := callsSince(h, from, http.MethodPost, pathApprove, r); n != 1 {
						t.Fatalf("%s approved %d times after /resume, want once", r, n)
					}
				}
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantSteps(t, h, id, rules.ClosedByPerson, rules.CreateMROpened, rules.CreateSucceeded, rules.HandleStarted,
					rules.HandleApproved, rules.HandleMerged, rules.CalledBack)
			}},
		{name: "the pipeline result from before the close does not count: waits for the new pipeline", want: rules.CreateMROpened,
			run: func(t *testing.T, h *flowtest.Harness) string {
				// The first pipeline passes (its hooks held back), the
				// one /resume starts keeps running.
				h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"success", "running"}})
				op := inPipelineWait(t, h)
				old := h.Webhooks(t)
				reopenMR(t, h, op.ID, flowtest.Requester)
				h.DeliverWebhooks(t)
				if err := resume(h, op.ID); err != nil {
					t.Fatalf("/resume: %v", err)
				}
				h.Deliver(t, redelivered(old)...) // the old success, late
				h.RunFor(t, 30*time.Minute)
				wantCalls(t, h, http.MethodPost, pathApprove, "", false, 0)
				return op.ID
			}},
		{name: "stale approvals of an older head do not count: the robots approve the new head, and without that no merge",
			want: rules.HandleReviewerDenied,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := closedAfterApprovals(t, h)
				reopenMR(t, h, op.ID, flowtest.Requester)
				// A fix pushed after the reopen: a new head, the old approvals stay in GitLab.
				h.GitLab.Push(h.Project.ID, op.SourceBranch, flowtest.Requester, "Fix", map[string]string{"fix.txt": "fixed\n"})
				h.DeliverWebhooks(t)
				h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: pathApprove, Status: http.StatusUnauthorized,
					User: "reviewer2"})
				from := len(h.GitLab.Calls())
				if err := resume(h, op.ID); err != nil {
					t.Fatalf("/resume: %v", err)
				}
				h.DeliverWebhooks(t)
				h.RunUntil(t, op.ID, rules.HandleReviewerDenied, time.Hour)
				if n := callsSince(h, from, http.MethodPut, pathMerge, ""); n != 0 {
					t.Fatalf("%d merges with approvals of an older head", n)
				}
				head := h.MR(t, op.ID).SHA
				approves := 0
				for _, c := range h.GitLab.Calls()[from:] {
					if c.Method == http.MethodPost && matches(pathApprove, c.Path) {
						approves++
						if !strings.Contains(string(c.Body)+c.Query, head) {
							t.Fatalf("approve after /resume without the head sha %s: %s", head, c.Body)
						}
					}
				}
				if approves < 2 {
					t.Fatalf("%d approve calls after /resume, want both reviewers to approve the new head", approves)
				}
				return op.ID
			}},
		{name: "in-GitLab approvals given before the close do not count after /resume", want: rules.ApprovalSent, opts: gitlabApprovals,
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.AddUser("carol", "carol-token")
				h.GitLab.AddUser("dave", "dave-token")
				p := flowtest.Change("svc")
				p.ApprovalFirst = false
				op := h.ToMROpened(t, p)
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				h.RequireStep(t, op.ID, rules.ApprovalSent)
				if err := h.Engine.DecideInGitLab(context.Background(), h.Op(t, op.ID), platform.User{Username: "carol"}, rules.GitLabApprove, "test"); err != nil {
					t.Fatal(err)
				}
				closeByPerson(t, h, op.ID)
				reopenMR(t, h, op.ID, flowtest.Requester)
				h.DeliverWebhooks(t)
				if err := resume(h, op.ID); err != nil {
					t.Fatalf("/resume: %v", err)
				}
				h.DeliverWebhooks(t)
				h.RunUntil(t, op.ID, rules.ApprovalSent, time.Hour)
				if err := h.Engine.DecideInGitLab(context.Background(), h.Op(t, op.ID), platform.User{Username: "dave"}, rules.GitLabApprove, "test"); err != nil {
					t.Fatal(err)
				}
				h.WorkUntilIdle(t)
				wantCalls(t, h, http.MethodPut, pathMerge, "", false, 0)
				return op.ID
			}},
		{name: "MR first, external approval: a new ticket for the head; the old ticket's decision does not count", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				p := flowtest.Change("svc")
				p.ApprovalFirst = false
				op := h.ToMROpened(t, p)
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				old := h.RequireStep(t, op.ID, rules.ApprovalSent).TicketID
				closeByPerson(t, h, op.ID)
				reopenMR(t, h, op.ID, flowtest.Requester)
				h.DeliverWebhooks(t)
				if err := resume(h, op.ID); err != nil {
					t.Fatalf("/resume: %v", err)
				}
				h.DeliverWebhooks(t)
				got := h.RunUntil(t, op.ID, rules.ApprovalSent, time.Hour)
				if got.TicketID == old {
					t.Fatalf("ticket %s after /resume, want a new one", got.TicketID)
				}
				reqs := h.Approvals.Requests()
				last := reqs[len(reqs)-1]
				if last.Ext["supersedes_ticket_id"] != old || last.Ext["head_sha"] != h.MR(t, op.ID).SHA {
					t.Fatalf("the new request's ext %v does not name the old ticket %s and the head", last.Ext, old)
				}
				res, err := h.Engine.AcceptApproval(context.Background(), rules.ApprovalCallback{RequestID: "late-" + old,
					OperationID: op.ID, TicketID: old, Decision: rules.DecisionApproved, Approver: "carol"})
				if err != nil || res != rules.ResultIgnoredStale {
					t.Fatalf("a decision on the old ticket answered %s, %v; want IGNORED_STALE", res, err)
				}
				h.RequireStep(t, op.ID, rules.ApprovalSent)
				if res := h.Decide(t, op.ID, rules.DecisionApproved); res != rules.ResultAccepted {
					t.Fatalf("the new ticket's decision: %s", res)
				}
				h.WorkUntilIdle(t)
				return op.ID
			}},
		{name: "a newer change took the binding: refused naming it", want: rules.ClosedByPerson,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := inPipelineWait(t, h)
				newer := h.Submit(t, flowtest.Change("svc"))
				reopenMR(t, h, op.ID, flowtest.Requester)
				wantRefused(t, resume(h, op.ID), newer.ID)
				if b := h.Binding(t, op.ID); b.OperationID != newer.ID {
					t.Fatalf("binding held by %s, want the newer %s", b.OperationID, newer.ID)
				}
				return op.ID
			}},
		{name: "reopened and merged by a person: the merge hook records the merge, naming who", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := inPipelineWait(t, h)
				reopenMR(t, h, op.ID, flowtest.Requester)
				if _, err := h.ClientAs(t, flowtest.Requester).Merge(context.Background(), h.Project.ID, op.MRIID,
					platform.MergeParams{SHA: h.MR(t, op.ID).SHA}); err != nil {
					t.Fatal(err)
				}
				h.Deliver(t, mergeHooksOnly(h.TakeWebhooks(t))...)
				h.WorkUntilIdle(t)
				wantDetail(t, h, op.ID, flowtest.Requester+" merged")
				wantBinding(t, h, op.ID, store.StatusMerged)
				return op.ID
			}},
		{name: "merged in GitLab after a reopen: /resume records the merge", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := inPipelineWait(t, h)
				reopenMR(t, h, op.ID, flowtest.Requester)
				if _, err := h.ClientAs(t, flowtest.Requester).Merge(context.Background(), h.Project.ID, op.MRIID,
					platform.MergeParams{SHA: h.MR(t, op.ID).SHA}); err != nil {
					t.Fatal(err)
				}
				wantRefused(t, resume(h, op.ID), "merged")
				wantBinding(t, h, op.ID, store.StatusMerged)
				return op.ID
			}},
	})
}

// mergeHooksOnly keeps the Merge Request Hooks of hooks (the reopen and
// the merge), dropping the pipelines'.
func mergeHooksOnly(hooks []gitlabfake.SentWebhook) []gitlabfake.SentWebhook {
	var out []gitlabfake.SentWebhook
	for _, w := range hooks {
		if w.Event == gitlabfake.EventMergeRequest {
			out = append(out, w)
		}
	}
	return out
}
