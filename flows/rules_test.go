package flows_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// The rules of the design's flows (DESIGN §3), one table case each, run
// in-process by flows/flowtest: a real PostgreSQL schema, gitlabfake, the
// jobs worked explicitly and an injected clock (no sleeps). Each case gets a
// harness of its own.

// rule is one case: run drives a change (asserting along the way) and
// returns its operation id; the change must end at want; check asserts the
// rest.
type rule struct {
	name  string
	opts  *flowtest.Opts
	run   func(t *testing.T, h *flowtest.Harness) string
	want  flows.StepCode
	check func(t *testing.T, h *flowtest.Harness, id string)
}

func runRules(t *testing.T, rules []rule) {
	t.Helper()
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, r.opts)
			id := r.run(t, h)
			h.RequireStep(t, id, r.want)
			if r.check != nil {
				r.check(t, h, id)
			}
		})
	}
}

// API paths of gitlabfake calls ("*" is one segment).
const (
	pathMRs      = "/api/v4/projects/*/merge_requests"
	pathMR       = "/api/v4/projects/*/merge_requests/*"
	pathApprove  = "/api/v4/projects/*/merge_requests/*/approve"
	pathMerge    = "/api/v4/projects/*/merge_requests/*/merge"
	pathCommits  = "/api/v4/projects/*/repository/commits"
	pathBranches = "/api/v4/projects/*/repository/branches"
	pathPipeline = "/api/v4/projects/*/merge_requests/*/pipelines"
)

// calls counts the calls gitlabfake answered with method and path, by user
// ("" any) and with a status below 300 when ok.
func calls(h *flowtest.Harness, method, pattern, user string, ok bool) int {
	n := 0
	for _, c := range h.GitLab.Calls() {
		if c.Method != method || !matches(pattern, c.Path) || (user != "" && c.User != user) || (ok && c.Status >= 300) {
			continue
		}
		n++
	}
	return n
}

func matches(pattern, path string) bool {
	p, s := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(p) != len(s) {
		return false
	}
	for i := range p {
		if p[i] != "*" && p[i] != s[i] {
			return false
		}
	}
	return true
}

func wantCalls(t *testing.T, h *flowtest.Harness, method, pattern, user string, ok bool, want int) {
	t.Helper()
	if got := calls(h, method, pattern, user, ok); got != want {
		t.Fatalf("%d %s %s calls (user %q, ok only %v), want %d", got, method, pattern, user, ok, want)
	}
}

func wantDetail(t *testing.T, h *flowtest.Harness, id, part string) {
	t.Helper()
	if op := h.Op(t, id); !strings.Contains(op.Detail, part) {
		t.Fatalf("detail %q does not mention %q", op.Detail, part)
	}
}

func wantBinding(t *testing.T, h *flowtest.Harness, id, status string) {
	t.Helper()
	if b := h.Binding(t, id); b.Status != status || b.OperationID != id {
		t.Fatalf("binding %s owned by %s, want %s owned by %s", b.Status, b.OperationID, status, id)
	}
}

func wantSteps(t *testing.T, h *flowtest.Harness, id string, want ...flows.StepCode) {
	t.Helper()
	got := h.Steps(t, id)
	i := 0
	for _, s := range got {
		if i < len(want) && s == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("steps %v do not pass through %v in order", got, want)
	}
}

// stepJobs lists the unfinished jobs that advance an operation (status-note
// refreshes left out).
func stepJobs(t *testing.T, h *flowtest.Harness) []string {
	t.Helper()
	var out []string
	for _, j := range h.Jobs(t) {
		if j.Kind != flows.KindRefreshNote {
			out = append(out, j.Kind)
		}
	}
	return out
}

func mrFirst(subject string) flows.SubmitParams {
	p := flowtest.Change(subject)
	p.ApprovalFirst = false
	return p
}

// approvalFunc is an ApprovalSystem made of a function.
type approvalFunc func(ctx context.Context, r flows.ApprovalRequest) (string, error)

func (f approvalFunc) RequestApproval(ctx context.Context, r flows.ApprovalRequest) (string, error) {
	return f(ctx, r)
}

// decidedDuringRequest is an approval system whose decision reaches the bot
// while the request is still being answered, before APPROVAL_SENT is
// written (DESIGN §3 step 2).
func decidedDuringRequest() (*flowtest.Opts, func(t *testing.T, h *flowtest.Harness) string) {
	var harness *flowtest.Harness
	var result string
	opts := &flowtest.Opts{Configure: func(cfg *flows.EngineConfig) {
		next := cfg.Approvals
		cfg.Approvals = approvalFunc(func(ctx context.Context, r flows.ApprovalRequest) (string, error) {
			ticket, err := next.RequestApproval(ctx, r)
			if err != nil {
				return "", err
			}
			result, err = harness.Engine.AcceptApproval(ctx, flows.ApprovalCallback{RequestID: "early", OperationID: r.OperationID,
				TicketID: ticket, Decision: flows.DecisionApproved, Approver: "carol"})
			return ticket, err
		})
	}}
	return opts, func(t *testing.T, h *flowtest.Harness) string {
		harness = h
		op := h.Submit(t, flowtest.Change("early"))
		h.WorkUntilIdle(t)
		if result != flows.ResultAccepted {
			t.Fatalf("the early decision was answered %q, want ACCEPTED", result)
		}
		return op.ID
	}
}

func TestCallbackRules(t *testing.T) {
	t.Parallel()
	earlyOpts, earlyRun := decidedDuringRequest()
	runRules(t, []rule{
		{name: "rejected ends REJECTED and frees the binding", want: flows.ApprovalRejected,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.Submit(t, flowtest.Change("svc"))
				h.WorkUntilIdle(t)
				if res := h.Decide(t, op.ID, flows.DecisionRejected); res != flows.ResultAccepted {
					t.Fatalf("rejection: %s", res)
				}
				h.WorkUntilIdle(t)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantBinding(t, h, id, store.StatusRejected)
				wantDetail(t, h, id, "rejected by carol")
				if j := stepJobs(t, h); len(j) != 0 {
					t.Fatalf("jobs left after the rejection: %v", j)
				}
				h.Submit(t, flowtest.Change("svc")) // the binding takes a new change
			}},
		{name: "withdrawn ends REJECTED", want: flows.ApprovalWithdrawn,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.Submit(t, flowtest.Change("svc"))
				h.WorkUntilIdle(t)
				h.Decide(t, op.ID, flows.DecisionWithdrawn)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) { wantBinding(t, h, id, store.StatusRejected) }},
		{name: "a repeated request id is DUPLICATE and changes nothing", want: flows.CreateMROpened,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				before := len(h.Events(t, op.ID))
				if res := h.Decide(t, op.ID, flows.DecisionRejected); res != flows.ResultDuplicate {
					t.Fatalf("repeated request id: %s, want DUPLICATE", res)
				}
				if after := len(h.Events(t, op.ID)); after != before {
					t.Fatalf("a duplicate callback wrote %d events", after-before)
				}
				return op.ID
			}},
		{name: "a decision arriving before APPROVAL_SENT is written is kept", opts: earlyOpts, run: earlyRun,
			want: flows.CreateMROpened,
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				if op := h.Op(t, id); op.TicketID != "T-1" {
					t.Fatalf("ticket %q, want T-1", op.TicketID)
				}
				wantSteps(t, h, id, flows.ApprovalSending, flows.CreateStarted, flows.CreateMROpened)
			}},
		{name: "MR first: approval carries the MR and goes on to handle it", want: flows.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				return h.ToMerged(t, mrFirst("svc")).ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantSteps(t, h, id, flows.CreateSucceeded, flows.ApprovalSending, flows.ApprovalSent, flows.HandleStarted)
			}},
	})
}

func TestCreateRules(t *testing.T) {
	t.Parallel()
	lostAnswer := func(method, path string) func(t *testing.T, h *flowtest.Harness) string {
		return func(t *testing.T, h *flowtest.Harness) string {
			h.GitLab.InjectFault(gitlabfake.Fault{Method: method, PathPattern: path, Status: http.StatusBadGateway,
				AfterEffect: true, Times: 1})
			op := h.Submit(t, flowtest.Change("svc"))
			h.WorkUntilIdle(t)
			h.Decide(t, op.ID, flows.DecisionApproved)
			w := h.WorkUntilIdle(t)
			if i := slices.IndexFunc(w, func(w flowtest.Worked) bool { return w.Kind == flows.KindCreateMR }); i < 0 || w[i].Err == nil {
				t.Fatalf("the create job did not fail on the lost answer: %v", w)
			}
			h.RequireStep(t, op.ID, flows.CreateStarted)
			return h.RunUntil(t, op.ID, flows.CreateMROpened, time.Minute).ID
		}
	}
	onlyOne := func(t *testing.T, h *flowtest.Harness, _ string) {
		wantCalls(t, h, http.MethodPost, pathBranches, flowtest.Robot, false, 1)
		wantCalls(t, h, http.MethodPost, pathCommits, flowtest.Robot, false, 1)
		wantCalls(t, h, http.MethodPost, pathMRs, flowtest.Robot, false, 1)
	}
	runRules(t, []rule{
		{name: "branch created but the answer lost: the retry uses it", want: flows.CreateMROpened,
			run: lostAnswer(http.MethodPost, pathBranches), check: onlyOne},
		{name: "commit made but the answer lost: the retry finds it at the tip", want: flows.CreateMROpened,
			run: lostAnswer(http.MethodPost, pathCommits), check: onlyOne},
		{name: "MR opened but the answer lost: the retry finds the open MR", want: flows.CreateMROpened,
			run: lostAnswer(http.MethodPost, pathMRs), check: onlyOne},
		{name: "retry after a failed pipeline with no push: same commit, a new pipeline", want: flows.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed", "success"}})
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				op = h.RequireStep(t, op.ID, flows.CreatePipelineFailed)
				wantDetail(t, h, op.ID, "failed")
				if _, err := h.Engine.Retry(context.Background(), op, flows.ActionParams{Actor: "alice", Source: "test", Command: "retry"}); err != nil {
					t.Fatal(err)
				}
				h.WorkUntilIdle(t)
				h.RequireStep(t, op.ID, flows.CreateMROpened)
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantCalls(t, h, http.MethodPost, pathCommits, flowtest.Robot, true, 1)
				wantCalls(t, h, http.MethodPost, pathPipeline, flowtest.Robot, true, 1)
				wantSteps(t, h, id, flows.CreatePipelineFailed, flows.CreateStarted, flows.CreateMROpened, flows.CreateSucceeded)
			}},
	})
}
