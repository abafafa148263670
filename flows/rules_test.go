package flows_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
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
	want  rules.StepCode
	check func(t *testing.T, h *flowtest.Harness, id string)
}

func runRules(t *testing.T, cases []rule) {
	t.Helper()
	for _, r := range cases {
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
	pathTree     = "/api/v4/projects/*/repository/tree"
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

// branchCreates lists the robot's branch creates gitlabfake answered with
// status.
// postsAnswered returns the POST calls to path pattern that GitLab answered
// with status.
func postsAnswered(h *flowtest.Harness, pattern string, status int) []gitlabfake.Call {
	var out []gitlabfake.Call
	for _, c := range h.GitLab.Calls() {
		if c.Method == http.MethodPost && matches(pattern, c.Path) && c.Status == status {
			out = append(out, c)
		}
	}
	return out
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

func wantSteps(t *testing.T, h *flowtest.Harness, id string, want ...rules.StepCode) {
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
		if j.Kind != rules.KindRefreshNote {
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
type approvalFunc func(ctx context.Context, r flows.ApprovalRequest) (flows.ApprovalTicket, error)

func (f approvalFunc) RequestApproval(ctx context.Context, r flows.ApprovalRequest) (flows.ApprovalTicket, error) {
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
		cfg.Approvals = approvalFunc(func(ctx context.Context, r flows.ApprovalRequest) (flows.ApprovalTicket, error) {
			ticket, err := next.RequestApproval(ctx, r)
			if err != nil {
				return ticket, err
			}
			result, err = harness.Engine.AcceptApproval(ctx, rules.ApprovalCallback{RequestID: "early", OperationID: r.OperationID,
				TicketID: ticket.ID, Decision: rules.DecisionApproved, Approver: "carol"})
			return ticket, err
		})
	}}
	return opts, func(t *testing.T, h *flowtest.Harness) string {
		harness = h
		op := h.Submit(t, flowtest.Change("early"))
		h.WorkUntilIdle(t)
		if result != rules.ResultAccepted {
			t.Fatalf("the early decision was answered %q, want ACCEPTED", result)
		}
		return op.ID
	}
}

func TestCallbackRules(t *testing.T) {
	t.Parallel()
	earlyOpts, earlyRun := decidedDuringRequest()
	runRules(t, []rule{
		{name: "rejected ends REJECTED and frees the binding", want: rules.ApprovalRejected,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.Submit(t, flowtest.Change("svc"))
				h.WorkUntilIdle(t)
				if res := h.Decide(t, op.ID, rules.DecisionRejected); res != rules.ResultAccepted {
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
		{name: "withdrawn ends REJECTED", want: rules.ApprovalWithdrawn,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.Submit(t, flowtest.Change("svc"))
				h.WorkUntilIdle(t)
				h.Decide(t, op.ID, rules.DecisionWithdrawn)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) { wantBinding(t, h, id, store.StatusRejected) }},
		{name: "a repeated request id is DUPLICATE and changes nothing", want: rules.CreateMROpened,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				before := len(h.Events(t, op.ID))
				if res := h.Decide(t, op.ID, rules.DecisionRejected); res != rules.ResultDuplicate {
					t.Fatalf("repeated request id: %s, want DUPLICATE", res)
				}
				if after := len(h.Events(t, op.ID)); after != before {
					t.Fatalf("a duplicate callback wrote %d events", after-before)
				}
				return op.ID
			}},
		{name: "a decision arriving before APPROVAL_SENT is written is kept", opts: earlyOpts, run: earlyRun,
			want: rules.CreateMROpened,
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				if op := h.Op(t, id); op.TicketID != "T-1" {
					t.Fatalf("ticket %q, want T-1", op.TicketID)
				}
				wantSteps(t, h, id, rules.ApprovalSending, rules.CreateStarted, rules.CreateMROpened)
			}},
		{name: "MR first: approval carries the MR and goes on to handle it", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				return h.ToMerged(t, mrFirst("svc")).ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantSteps(t, h, id, rules.CreateSucceeded, rules.ApprovalSending, rules.ApprovalSent, rules.HandleStarted)
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
			h.Decide(t, op.ID, rules.DecisionApproved)
			w := h.WorkUntilIdle(t)
			if i := slices.IndexFunc(w, func(w flowtest.Worked) bool { return w.Kind == rules.KindCreateMR }); i < 0 || w[i].Err == nil {
				t.Fatalf("the create job did not fail on the lost answer: %v", w)
			}
			h.RequireStep(t, op.ID, rules.CreateStarted)
			return h.RunUntil(t, op.ID, rules.CreateMROpened, time.Minute).ID
		}
	}
	onlyOne := func(t *testing.T, h *flowtest.Harness, _ string) {
		// The branch is created by its commit without a read first: the
		// retry's commit is answered 400 "A branch called ... already
		// exists" and makes nothing; the retry reads the branch and finds
		// its commit there.
		wantCalls(t, h, http.MethodPost, pathBranches, flowtest.Robot, false, 0)
		wantCalls(t, h, http.MethodPost, pathCommits, flowtest.Robot, false, 2)
		if n := len(postsAnswered(h, pathCommits, http.StatusBadRequest)); n != 1 {
			t.Fatalf("%d commits answered 400 (the branch exists), want the retry's 1", n)
		}
		wantCalls(t, h, http.MethodPost, pathMRs, flowtest.Robot, false, 1)
	}
	runRules(t, []rule{
		{name: "branch and commit made in one call but the answer lost: the retry finds them", want: rules.CreateMROpened,
			run: lostAnswer(http.MethodPost, pathCommits), check: onlyOne},
		{name: "one file created without a tree listing", want: rules.CreateMROpened,
			run: func(t *testing.T, h *flowtest.Harness) string { return h.ToMROpened(t, flowtest.Change("svc")).ID },
			check: func(t *testing.T, h *flowtest.Harness, _ string) {
				wantCalls(t, h, http.MethodGet, pathTree, flowtest.Robot, false, 0)
				wantCalls(t, h, http.MethodPost, pathCommits, flowtest.Robot, false, 1)
			}},
		{name: "one file that exists: the guess refused, the other action taken", want: rules.CreateMROpened,
			run: func(t *testing.T, h *flowtest.Harness) string {
				p := flowtest.Change("svc")
				p.Files[0].Path = "README.md" // on the target: create is refused, update fits
				return h.ToMROpened(t, p).ID
			},
			check: func(t *testing.T, h *flowtest.Harness, _ string) {
				wantCalls(t, h, http.MethodGet, pathTree, flowtest.Robot, false, 0)
				wantCalls(t, h, http.MethodPost, pathCommits, flowtest.Robot, false, 2)
				if n := len(postsAnswered(h, pathCommits, http.StatusBadRequest)); n != 1 {
					t.Fatalf("%d commits refused, want the wrong guess's 1", n)
				}
				wantCalls(t, h, http.MethodPost, pathBranches, flowtest.Robot, false, 0)
			}},
		{name: "a second change of the project's existing file guesses update at once", want: rules.CreateMROpened,
			run: func(t *testing.T, h *flowtest.Harness) string {
				for _, subject := range []string{"svc-a", "svc-b"} {
					p := flowtest.Change(subject)
					p.Files[0].Path = "README.md"
					h.ToMROpened(t, p)
				}
				p := flowtest.Change("svc-c")
				p.Files[0].Path = "README.md"
				return h.ToMROpened(t, p).ID
			},
			check: func(t *testing.T, h *flowtest.Harness, _ string) {
				// The first change's create is refused (2 calls); the
				// next two update at once (1 call each).
				wantCalls(t, h, http.MethodPost, pathCommits, flowtest.Robot, false, 4)
				if n := len(postsAnswered(h, pathCommits, http.StatusBadRequest)); n != 1 {
					t.Fatalf("%d commits refused, want the first change's 1", n)
				}
			}},
		{name: "two files, the commit creating the branch refused: the branch is created and committed on", want: rules.CreateMROpened,
			run: func(t *testing.T, h *flowtest.Harness) string {
				// GitLab's answer when the target moved between the tree
				// listing and the commit (a file the listing did not have).
				h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: pathCommits, Status: http.StatusBadRequest,
					Body: "A file with this name already exists", Times: 1})
				p := flowtest.Change("svc")
				p.Files = append(p.Files, store.File{Path: "services/svc-extra.yaml", Content: "x: 1\n"})
				return h.ToMROpened(t, p).ID
			},
			check: func(t *testing.T, h *flowtest.Harness, _ string) {
				wantCalls(t, h, http.MethodGet, pathTree, flowtest.Robot, false, 2) // the target's, then the branch's
				wantCalls(t, h, http.MethodPost, pathBranches, flowtest.Robot, false, 1)
				wantCalls(t, h, http.MethodPost, pathCommits, flowtest.Robot, false, 2)
				wantCalls(t, h, http.MethodPost, pathMRs, flowtest.Robot, false, 1)
			}},
		{name: "MR opened but the answer lost: the retry finds the open MR", want: rules.CreateMROpened,
			run: lostAnswer(http.MethodPost, pathMRs), check: onlyOne},
		{name: "retry after a failed pipeline with no push: same commit, a new pipeline", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed", "success"}})
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				op = h.RequireStep(t, op.ID, rules.CreatePipelineFailed)
				wantDetail(t, h, op.ID, "failed")
				if _, err := h.Engine.Retry(context.Background(), op, rules.ActionParams{Actor: "alice", Source: "test", Command: "retry"}); err != nil {
					t.Fatal(err)
				}
				h.WorkUntilIdle(t)
				h.RequireStep(t, op.ID, rules.CreateMROpened)
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantCalls(t, h, http.MethodPost, pathCommits, flowtest.Robot, true, 1)
				wantCalls(t, h, http.MethodPost, pathPipeline, flowtest.Robot, true, 1)
				wantSteps(t, h, id, rules.CreatePipelineFailed, rules.CreateStarted, rules.CreateMROpened, rules.CreateSucceeded)
			}},
	})
}

func TestPipelineWaitRules(t *testing.T) {
	t.Parallel()
	failing := func(t *testing.T, h *flowtest.Harness) store.Operation {
		h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed"}})
		return h.ToMROpened(t, flowtest.Change("svc"))
	}
	runRules(t, []rule{
		{name: "a failed pipeline's webhook: CREATE_PIPELINE_FAILED", want: rules.CreatePipelineFailed,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := failing(t, h)
				h.DeliverWebhooks(t)
				if w := h.WorkUntilIdle(t); slices.Contains(flowtest.Kinds(w), rules.KindAwaitPipeline) {
					t.Fatalf("the poll ran although the webhook decided: %v", w)
				}
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantDetail(t, h, id, "failed")
				wantBinding(t, h, id, store.StatusCreateFailed)
			}},
		{name: "webhooks lost: the poll sees the failed pipeline", want: rules.CreatePipelineFailed,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := failing(t, h)
				h.TakeWebhooks(t)
				if w := h.WorkUntilIdle(t); len(w) != 0 {
					t.Fatalf("jobs ran before the first poll was due: %v", w)
				}
				h.Advance(flowtest.Poll.ShortInterval)
				h.WorkUntilIdle(t)
				return op.ID
			}},
		{name: "no result by the deadline: CREATE_PIPELINE_PENDING; /resume waits again", want: rules.CreateMROpened,
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"running"}})
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.TakeWebhooks(t)
				start := h.Now()
				op = h.RunUntil(t, op.ID, rules.CreatePipelinePending, 3*time.Hour)
				if waited := h.Now().Sub(start); waited != flowtest.Poll.PipelineDeadline {
					t.Fatalf("parked after %s, want the deadline %s", waited, flowtest.Poll.PipelineDeadline)
				}
				wantDetail(t, h, op.ID, "no pipeline result")
				// 8 short polls in the first 2 minutes, then one every 2 minutes.
				if polls := calls(h, http.MethodGet, pathMR, flowtest.Robot, true); polls < 60 || polls > 75 {
					t.Fatalf("%d MR reads while waiting 2 h, want about 67", polls)
				}
				if _, err := h.Engine.Resume(context.Background(), op, rules.ActionParams{Actor: "olivia", Source: "test", Command: "resume"}); err != nil {
					t.Fatal(err)
				}
				h.RunFor(t, time.Hour) // a fresh deadline: still waiting
				return op.ID
			}},
		{name: "a webhook delivered twice is processed once", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				hooks := h.TakeWebhooks(t)
				h.Deliver(t, hooks...)
				if again := h.Deliver(t, hooks...); slices.Contains(again, true) {
					t.Fatalf("a duplicate was stored again: %v", again)
				}
				h.WorkUntilIdle(t)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantCalls(t, h, http.MethodPost, pathApprove, "", false, 2)
				wantCalls(t, h, http.MethodPut, pathMerge, "", false, 1)
			}},
		{name: "a late webhook of an older head's pipeline changes nothing", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed", "success"}})
				op := h.ToMROpened(t, flowtest.Change("svc"))
				old := h.TakeWebhooks(t) // the first head's pipeline failed
				if _, err := h.ClientAs(t, flowtest.Requester).CreateCommit(context.Background(), h.Project.ID, platform.CommitParams{
					Branch: op.SourceBranch, Message: "fix", Actions: []platform.FileAction{{Action: "create", FilePath: "fix.yaml", Content: "x: 1"}},
				}); err != nil {
					t.Fatal(err)
				}
				h.Deliver(t, old...)
				h.WorkUntilIdle(t)
				h.RequireStep(t, op.ID, rules.CreateMROpened)
				h.DeliverWebhooks(t) // the new head's pipeline passed
				h.WorkUntilIdle(t)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				if slices.Contains(h.Steps(t, id), rules.CreatePipelineFailed) {
					t.Fatalf("the old head's failed pipeline failed the change: %v", h.Steps(t, id))
				}
				if op, mr := h.Op(t, id), h.MR(t, id); op.HeadSHA != mr.SHA {
					t.Fatalf("operation head %s, MR head %s", op.HeadSHA, mr.SHA)
				}
			}},
	})
}

func TestHandleRules(t *testing.T) {
	t.Parallel()
	ff := &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: "ff"}, Configure: noDeferCI}
	// behind opens the MR, then moves main so that the MR needs a rebase
	// (merge method ff) before the handle phase starts.
	behind := func(t *testing.T, h *flowtest.Harness) store.Operation {
		op := h.ToMROpened(t, flowtest.Change("svc"))
		h.GitLab.PushToTarget(h.Project.ID, "main")
		return op
	}
	runRules(t, []rule{
		{name: "each reviewer approves once, with the head sha; the merge carries it", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string { return h.ToMerged(t, flowtest.Change("svc")).ID },
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantCalls(t, h, http.MethodPost, pathApprove, "reviewer1", false, 1)
				wantCalls(t, h, http.MethodPost, pathApprove, "reviewer2", false, 1)
				head := h.MR(t, id).SHA
				for _, c := range h.GitLab.Calls() {
					if (matches(pathApprove, c.Path) || matches(pathMerge, c.Path)) && !strings.Contains(string(c.Body)+c.Query, head) {
						t.Fatalf("%s %s without the head sha %s: %s", c.Method, c.Path, head, c.Body)
					}
				}
			}},
		{name: "merged by a person before the handle phase: finish as merged, never approve", want: rules.CalledBack,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				if _, err := h.ClientAs(t, flowtest.Requester).Merge(context.Background(), h.Project.ID, op.MRIID, platform.MergeParams{SHA: op.HeadSHA}); err != nil {
					t.Fatal(err)
				}
				h.DeliverWebhooks(t) // the pipeline, the merge and the deploy
				return h.RunUntil(t, op.ID, rules.CalledBack, time.Minute).ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantCalls(t, h, http.MethodPost, pathApprove, "", false, 0)
				wantCalls(t, h, http.MethodPut, pathMerge, flowtest.Robot, false, 0)
				if op, mr := h.Op(t, id), h.MR(t, id); op.MergeCommitSHA == "" || op.MergeCommitSHA != mr.MergeCommitSHA {
					t.Fatalf("merge commit %q, GitLab's %q", op.MergeCommitSHA, mr.MergeCommitSHA)
				}
			}},
		{name: "a reviewer's 503 is retried for that reviewer alone", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: pathApprove, Status: http.StatusServiceUnavailable,
					User: "reviewer2", Times: 1})
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				h.RequireStep(t, op.ID, rules.HandleStarted)
				h.Advance(flowtest.Poll.ShortInterval) // the reviewer's own backoff
				h.WorkUntilIdle(t)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantCalls(t, h, http.MethodPost, pathApprove, "reviewer1", false, 1)
				wantCalls(t, h, http.MethodPost, pathApprove, "reviewer2", false, 2)
			}},
		{name: "401 on approve that took effect (already approved): go on", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: pathApprove, Status: http.StatusUnauthorized,
					User: "reviewer1", Times: 1, AfterEffect: true})
				return h.ToMerged(t, flowtest.Change("svc")).ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantCalls(t, h, http.MethodPost, pathApprove, "reviewer1", false, 1)
			}},
		{name: "401 on approve for a reviewer that has not approved: HANDLE_REVIEWER_DENIED", want: rules.HandleReviewerDenied,
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: pathApprove, Status: http.StatusUnauthorized,
					User: "reviewer2"})
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantDetail(t, h, id, "reviewer2")
				wantCalls(t, h, http.MethodPost, pathApprove, "reviewer2", false, 1) // never retried
				wantCalls(t, h, http.MethodPut, pathMerge, "", false, 0)
			}},
		{name: "merge answered 409 (head moved): the pipeline wait again, one round, no second approval", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPut, PathPattern: pathMerge, Status: http.StatusConflict,
					Body: "SHA does not match HEAD of source branch", Times: 1})
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				h.RequireStep(t, op.ID, rules.HandleAwaitPipeline)
				h.Advance(flowtest.Poll.ShortInterval)
				h.WorkUntilIdle(t)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				if op := h.Op(t, id); op.Rounds != 1 {
					t.Fatalf("rounds %d, want 1", op.Rounds)
				}
				wantCalls(t, h, http.MethodPost, pathApprove, "", false, 2)
				wantCalls(t, h, http.MethodPut, pathMerge, "", false, 2)
			}},
		{name: "need_rebase: rebase, wait for the new head's pipeline, merge", want: rules.HandleMerged, opts: ff,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := behind(t, h)
				h.TakeWebhooks(t)
				return h.RunUntil(t, op.ID, rules.HandleMerged, 10*time.Minute).ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantSteps(t, h, id, rules.HandleApproved, rules.HandleRebasing, rules.HandleAwaitPipeline, rules.HandleStarted,
					rules.HandleApproved, rules.HandleMerged)
				wantCalls(t, h, http.MethodPut, "/api/v4/projects/*/merge_requests/*/rebase", flowtest.Robot, false, 1)
				if op, mr := h.Op(t, id), h.MR(t, id); op.Rounds != 1 || op.MergeCommitSHA != mr.SHA {
					t.Fatalf("rounds %d, merge commit %s, want 1 round and the rebased head %s (fast-forward)", op.Rounds, op.MergeCommitSHA, mr.SHA)
				}
			}},
		{name: "rebase rounds are bounded: HANDLE_FAILED once merge.max_rounds are used", want: rules.HandleFailed,
			opts: &flowtest.Opts{Project: gitlabfake.ProjectSpec{MergeMethod: "ff"}, Poll: withMaxRounds(1), Configure: noDeferCI},
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := behind(t, h)
				h.TakeWebhooks(t)
				h.RunUntil(t, op.ID, rules.HandleAwaitPipeline, 10*time.Minute) // rebased once
				h.GitLab.PushToTarget(h.Project.ID, "main")                     // main moves again
				h.RunUntil(t, op.ID, rules.HandleFailed, 10*time.Minute)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) { wantDetail(t, h, id, "rebase rounds") }},
		{name: "rebase conflict: HANDLE_REBASE_CONFLICT", want: rules.HandleRebaseConflict, opts: ff,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := behind(t, h)
				h.GitLab.SetRebaseBehavior(h.Project.ID, op.MRIID, gitlabfake.RebaseBehavior{Conflict: true})
				h.TakeWebhooks(t)
				h.RunUntil(t, op.ID, rules.HandleRebaseConflict, 10*time.Minute)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantBinding(t, h, id, store.StatusHandleFailed)
				wantCalls(t, h, http.MethodPut, pathMerge, "", false, 0)
			}},
		{name: "GitLab keeps checking: back off, HANDLE_MERGE_PENDING at the rebase deadline", want: rules.HandleMergePending,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.GitLab.SetMergeBlock(h.Project.ID, op.MRIID, gitlabfake.MergeBlock{DetailedMergeStatus: "checking"})
				h.DeliverWebhooks(t)
				h.RunUntil(t, op.ID, rules.HandleMergePending, time.Hour)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantDetail(t, h, id, "checking")
				if n := calls(h, http.MethodPut, pathMerge, "", false); n < 2 {
					t.Errorf("merge calls = %d, want the merge tried again after backing off", n)
				}
			}},
		{name: "a draft: HANDLE_DRAFT with the reason, merge tried once", want: rules.HandleDraft,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.GitLab.SetMergeBlock(h.Project.ID, op.MRIID, gitlabfake.MergeBlock{Draft: true})
				h.DeliverWebhooks(t)
				h.RunFor(t, time.Hour)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantDetail(t, h, id, "draft")
				wantCalls(t, h, http.MethodPut, pathMerge, "", false, 1)
			}},
	})
}

func withMaxRounds(n int) flows.PollConfig {
	p := flowtest.Poll
	p.MaxRounds = n
	return p
}

func TestAppliedRules(t *testing.T) {
	t.Parallel()
	deploy := func(t *testing.T, h *flowtest.Harness, op store.Operation, id, sha string) string {
		t.Helper()
		res, err := h.Engine.AcceptDeploy(context.Background(), rules.DeployCallback{RequestID: id, ProjectID: op.ProjectID,
			MRIID: op.MRIID, MergeCommitSHA: sha, Status: "success"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	runRules(t, []rule{
		{name: "deploy pipeline webhook flips MERGED once, counted once", want: rules.CalledBack,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMerged(t, flowtest.Change("svc"))
				hooks := h.DeliverWebhooks(t) // the deploy pipeline on main
				h.WorkUntilIdle(t)
				h.RequireStep(t, op.ID, rules.CalledBack)
				if got := deploy(t, h, op, "d1", op.MergeCommitSHA); got != rules.ResultIgnoredStale {
					t.Fatalf("deploy callback after the flip: %s, want IGNORED_STALE", got)
				}
				h.Advance(flowtest.Poll.ShortInterval) // the deploy poll finds the change flipped
				h.WorkUntilIdle(t)
				if len(hooks) == 0 {
					t.Fatal("no deploy webhook")
				}
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantBinding(t, h, id, store.StatusValidated)
				if got := validatedCount(t, h); len(got) != 1 || got["webhook"] != 1 {
					t.Fatalf("changebot_validated_total %v, want webhook 1", got)
				}
			}},
		{name: "deploy callback flips MERGED once; a repeat is DUPLICATE, a later one IGNORED_STALE", want: rules.CalledBack,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMerged(t, flowtest.Change("svc"))
				h.TakeWebhooks(t)
				for _, c := range []struct{ id, want string }{
					{"d1", rules.ResultAccepted}, {"d1", rules.ResultDuplicate}, {"d2", rules.ResultIgnoredStale},
				} {
					if got := deploy(t, h, op, c.id, op.MergeCommitSHA); got != c.want {
						t.Fatalf("deploy callback %s: %s, want %s", c.id, got, c.want)
					}
				}
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantBinding(t, h, id, store.StatusValidated)
				n := 0
				for _, e := range h.Events(t, id) {
					if rules.StepCode(e.ToStep) == rules.CalledBack {
						n++
					}
				}
				if n != 1 {
					t.Fatalf("%d events into CALLED_BACK, want 1", n)
				}
			}},
		{name: "deploy callback before the merge: IGNORED_STALE, nothing moves", want: rules.CreateMROpened,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				if got := deploy(t, h, op, "d1", ""); got != rules.ResultIgnoredStale {
					t.Fatalf("early deploy callback: %s", got)
				}
				return op.ID
			}},
		{name: "deploy callback for another merge commit: IGNORED_STALE", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMerged(t, flowtest.Change("svc"))
				if got := deploy(t, h, op, "d1", strings.Repeat("0", 40)); got != rules.ResultIgnoredStale {
					t.Fatalf("deploy callback for another commit: %s", got)
				}
				return op.ID
			}},
		{name: "deploy callback failed: recorded on the MERGED change, a later success applies it", want: rules.CalledBack,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMerged(t, flowtest.Change("svc"))
				h.TakeWebhooks(t)
				res, err := h.Engine.AcceptDeploy(context.Background(), rules.DeployCallback{RequestID: "d1", ProjectID: op.ProjectID,
					MRIID: op.MRIID, MergeCommitSHA: op.MergeCommitSHA, Status: "failed"})
				if err != nil || res != rules.ResultFailedRecorded {
					t.Fatalf("failed deploy callback: %q, %v; want %s", res, err, rules.ResultFailedRecorded)
				}
				h.RequireStep(t, op.ID, rules.HandleMerged)
				wantBinding(t, h, op.ID, store.StatusMerged)
				wantDetail(t, h, op.ID, "reported the deploy of !")
				wantDetail(t, h, op.ID, "failed (deploy callback d1)")
				got, evs, err := h.Engine.Get(context.Background(), op.ID)
				if err != nil {
					t.Fatal(err)
				}
				last := evs[len(evs)-1]
				if last.Type != store.EventDeployFailed || last.Actor != "deploy" || last.Source != "callback:d1" {
					t.Fatalf("last event %s by %s from %s, want deploy_failed by deploy from callback:d1", last.Type, last.Actor, last.Source)
				}
				v := h.Engine.StatusView(got, evs)
				if e := v.Timeline[len(v.Timeline)-1]; e.Source != "deploy callback" || e.StepName != "HANDLE_MERGED" {
					t.Fatalf("the status comment's last timeline entry %+v, want the failed deploy from the deploy callback", e)
				}
				if got := deploy(t, h, op, "d2", op.MergeCommitSHA); got != rules.ResultAccepted {
					t.Fatalf("deploy callback success after a failure: %s, want ACCEPTED", got)
				}
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantBinding(t, h, id, store.StatusValidated)
			}},
		{name: "deploy callback failed for a validated change: IGNORED_STALE, nothing recorded", want: rules.CalledBack,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMerged(t, flowtest.Change("svc"))
				h.TakeWebhooks(t)
				if got := deploy(t, h, op, "d1", op.MergeCommitSHA); got != rules.ResultAccepted {
					t.Fatalf("deploy callback: %s", got)
				}
				res, err := h.Engine.AcceptDeploy(context.Background(), rules.DeployCallback{RequestID: "d2", ProjectID: op.ProjectID,
					MRIID: op.MRIID, Status: "failed"})
				if err != nil || res != rules.ResultIgnoredStale {
					t.Fatalf("failed deploy callback after the flip: %q, %v; want IGNORED_STALE", res, err)
				}
				for _, e := range h.Events(t, op.ID) {
					if e.Type == store.EventDeployFailed {
						t.Fatal("a failed deploy was recorded on a validated change")
					}
				}
				return op.ID
			}},
		{name: "a deploy pipeline on the target before the merge flips nothing", want: rules.CreateMROpened,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.TakeWebhooks(t)
				h.GitLab.PushToTarget(h.Project.ID, "main")
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				return op.ID
			}},
		{name: "failed deploy pipeline: keep waiting, DEPLOY_PENDING at the deadline", want: rules.DeployPending,
			opts: &flowtest.Opts{Poll: withDeployDeadline(30 * time.Minute)},
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{Deploy: []string{"failed"}})
				op := h.ToMerged(t, flowtest.Change("svc"))
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				h.RequireStep(t, op.ID, rules.HandleMerged)
				start := h.Now()
				h.RunUntil(t, op.ID, rules.DeployPending, time.Hour)
				if waited := h.Now().Sub(start); waited != 30*time.Minute {
					t.Fatalf("parked after %s, want the deploy deadline 30m", waited)
				}
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				wantBinding(t, h, id, store.StatusMerged)
				wantDetail(t, h, id, "no successful deploy pipeline")
			}},
	})
}

func withDeployDeadline(d time.Duration) flows.PollConfig {
	p := flowtest.Poll
	p.DeployDeadline = d
	return p
}

func TestReconcilerRules(t *testing.T) {
	t.Parallel()
	reconcile := func(t *testing.T, h *flowtest.Harness) flows.ReconcileReport {
		t.Helper()
		rep, err := flows.NewReconciler(h.Engine, h.Store, flows.ReconcileConfig{}).Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	runRules(t, []rule{
		{name: "MERGED with every deploy signal lost: flipped once older than min_age", want: rules.CalledBack,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMerged(t, flowtest.Change("svc"))
				h.TakeWebhooks(t)
				if rep := reconcile(t, h); rep.Candidates != 0 {
					t.Fatalf("a change merged just now was a candidate: %+v", rep)
				}
				h.Advance(flows.DefaultReconcileConfig.MinAge + time.Minute) // no job runs meanwhile
				if rep := reconcile(t, h); rep.Flipped["exact"] != 1 {
					t.Fatalf("reconciler report %+v, want one exact flip", rep)
				}
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) { wantBinding(t, h, id, store.StatusValidated) }},
		{name: "a quiet pipeline wait's poll is woken", want: rules.HandleMerged,
			opts: &flowtest.Opts{Poll: withLongPolls()},
			run: func(t *testing.T, h *flowtest.Harness) string {
				h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"running", "success"}})
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.Advance(flowtest.Poll.ShortInterval)
				h.WorkUntilIdle(t) // the first poll sees it running; the next is an hour away
				if _, err := h.ClientAs(t, flowtest.Requester).CreateMergeRequestPipeline(context.Background(), h.Project.ID, op.MRIID); err != nil {
					t.Fatal(err)
				}
				h.TakeWebhooks(t) // its success webhook is lost
				h.Advance(flows.DefaultReconcileConfig.QuietAfter + time.Minute)
				if due := h.DueJobs(t); len(due) != 0 {
					t.Fatalf("jobs due before the reconciler woke anything: %d", len(due))
				}
				if rep := reconcile(t, h); rep.Woken != 1 {
					t.Fatalf("reconciler report %+v, want one woken wait", rep)
				}
				h.WorkUntilIdle(t)
				return op.ID
			}},
	})
}

// withLongPolls polls once after ShortInterval, then hourly.
func withLongPolls() flows.PollConfig {
	p := flowtest.Poll
	p.ShortCount, p.LongInterval = 0, time.Hour
	return p
}

func TestCancelRules(t *testing.T) {
	t.Parallel()
	cancel := func(t *testing.T, h *flowtest.Harness, id string) error {
		t.Helper()
		_, err := h.Engine.Cancel(context.Background(), h.Op(t, id), rules.ActionParams{Actor: "alice", Source: "test", Command: "cancel"})
		return err
	}
	mustCancel := func(t *testing.T, h *flowtest.Harness, id string) {
		t.Helper()
		if err := cancel(t, h, id); err != nil {
			t.Fatalf("cancel: %v", err)
		}
	}
	closeCalls := func(t *testing.T, h *flowtest.Harness, want int) {
		t.Helper()
		n := 0
		for _, c := range h.GitLab.Calls() {
			if c.Method == http.MethodPut && matches(pathMR, c.Path) && c.User == flowtest.Robot && strings.Contains(string(c.Body)+c.Query, "close") {
				n++
			}
		}
		if n != want {
			t.Fatalf("the robot closed the MR %d times, want %d", n, want)
		}
	}
	runRules(t, []rule{
		{name: "open MR: closed in GitLab, CLOSED, the binding takes a new change", want: rules.Closed,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				mustCancel(t, h, op.ID)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, id string) {
				if mr := h.MR(t, id); mr.State != "closed" {
					t.Fatalf("MR %s, want closed", mr.State)
				}
				closeCalls(t, h, 1)
				wantBinding(t, h, id, store.StatusClosed)
				h.WorkUntilIdle(t) // the pipeline wait's job finds the change moved on
				h.RequireStep(t, id, rules.Closed)
				h.Submit(t, flowtest.Change("svc"))
			}},
		{name: "before any MR: CLOSED without a GitLab call", want: rules.Closed,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.Submit(t, flowtest.Change("svc"))
				h.WorkUntilIdle(t)
				before := len(h.GitLab.Calls())
				mustCancel(t, h, op.ID)
				if after := len(h.GitLab.Calls()); after != before {
					t.Fatalf("cancel made %d GitLab calls", after-before)
				}
				return op.ID
			}},
		{name: "MR already closed in GitLab: no second close", want: rules.Closed,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				if _, err := h.ClientAs(t, flowtest.Requester).CloseMergeRequest(context.Background(), h.Project.ID, op.MRIID); err != nil {
					t.Fatal(err)
				}
				mustCancel(t, h, op.ID)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, _ string) { closeCalls(t, h, 0) }},
		{name: "MR merged meanwhile: finished as merged, the cancel refused", want: rules.HandleMerged,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				if _, err := h.ClientAs(t, flowtest.Requester).Merge(context.Background(), h.Project.ID, op.MRIID, platform.MergeParams{SHA: op.HeadSHA}); err != nil {
					t.Fatal(err)
				}
				h.TakeWebhooks(t) // the cancel reads GitLab itself
				if err := cancel(t, h, op.ID); !errors.Is(err, rules.ErrNotApplicable) {
					t.Fatalf("cancel of a merged change: %v, want ErrNotApplicable", err)
				}
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, _ string) { closeCalls(t, h, 0) }},
		{name: "a finished change cannot be cancelled", want: rules.ApprovalRejected,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.Submit(t, flowtest.Change("svc"))
				h.WorkUntilIdle(t)
				h.Decide(t, op.ID, rules.DecisionRejected)
				if err := cancel(t, h, op.ID); !errors.Is(err, rules.ErrNotApplicable) {
					t.Fatalf("cancel of a rejected change: %v, want ErrNotApplicable", err)
				}
				return op.ID
			}},
		{name: "a cancelled change's queued create job does nothing", want: rules.Closed,
			run: func(t *testing.T, h *flowtest.Harness) string {
				op := h.Submit(t, flowtest.Change("svc"))
				h.WorkUntilIdle(t)
				h.Decide(t, op.ID, rules.DecisionApproved)
				mustCancel(t, h, op.ID)
				h.WorkUntilIdle(t)
				return op.ID
			},
			check: func(t *testing.T, h *flowtest.Harness, _ string) {
				wantCalls(t, h, http.MethodPost, pathBranches, "", false, 0)
			}},
	})
}

// validatedCount reads changebot_validated_total by source.
func validatedCount(t *testing.T, h *flowtest.Harness) map[string]float64 {
	t.Helper()
	mfs, err := h.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "changebot_validated_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "source" && m.GetCounter().GetValue() > 0 {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
