package flows_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/github/githubfake"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// retargetRig is what the retarget cases need of one platform's fake:
// the robot accounts' writes to the request (approve, merge, rebase), the
// request's target branch and state as the fake shows them, and a merge
// call that fails once with 503.
type retargetRig struct {
	platform  string
	writes    func(h *flowtest.Harness) int
	target    func(t *testing.T, h *flowtest.Harness, id string) (branch, state string)
	failMerge func(h *flowtest.Harness)
	// draft marks the request a draft, or ready again.
	draft func(h *flowtest.Harness, op store.Operation, draft bool)
}

var gitlabRetarget = retargetRig{
	platform: store.PlatformGitLab,
	writes: func(h *flowtest.Harness) int {
		n := 0
		for _, c := range h.GitLab.Calls() {
			if c.User == flowtest.Requester || c.User == "" {
				continue
			}
			switch {
			case c.Method == http.MethodPost && matches(pathApprove, c.Path),
				c.Method == http.MethodPut && matches(pathMerge, c.Path),
				c.Method == http.MethodPut && matches(pathMR+"/rebase", c.Path):
				n++
			}
		}
		return n
	},
	target: func(t *testing.T, h *flowtest.Harness, id string) (string, string) {
		mr := h.MR(t, id)
		return mr.TargetBranch, mr.State
	},
	failMerge: func(h *flowtest.Harness) {
		h.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPut, PathPattern: pathMerge, Status: http.StatusServiceUnavailable, Times: 1})
	},
	draft: func(h *flowtest.Harness, op store.Operation, draft bool) {
		h.GitLab.SetMergeBlock(op.ProjectID, op.MRIID, gitlabfake.MergeBlock{Draft: draft})
	},
}

var githubRetarget = retargetRig{
	platform: store.PlatformGitHub,
	writes: func(h *flowtest.Harness) int {
		n := 0
		for _, c := range h.GitHub.Calls() {
			if c.Login == flowtest.Requester || c.Login == "" {
				continue
			}
			switch {
			case c.Method == http.MethodPost && matches("/repos/*/*/pulls/*/reviews", c.Path),
				c.Method == http.MethodPut && matches("/repos/*/*/pulls/*/merge", c.Path),
				c.Method == http.MethodPut && matches("/repos/*/*/pulls/*/update-branch", c.Path):
				n++
			}
		}
		return n
	},
	target: func(t *testing.T, h *flowtest.Harness, id string) (string, string) {
		pr := h.PR(t, id)
		switch {
		case pr.Merged:
			return pr.Base, platform.MRStateMerged
		case pr.State == "open":
			return pr.Base, platform.MRStateOpened
		}
		return pr.Base, platform.MRStateClosed
	},
	failMerge: func(h *flowtest.Harness) {
		h.GitHub.InjectFault(githubfake.Fault{Method: http.MethodPut, PathPattern: "/repos/*/*/pulls/*/merge", Status: http.StatusServiceUnavailable, Times: 1})
	},
	draft: func(h *flowtest.Harness, op store.Operation, draft bool) {
		h.GitHub.SetDraft(op.ProjectID, op.MRIID, draft, flowtest.Requester)
	},
}

// TestRetargetedChangeStops (issue 21 point 1): a person retargets the
// change's merge request from main onto production mid-flow. The
// approvals and the binding were given for main, so the change stops in
// HANDLE_RETARGETED saying so, and nothing more is approved, rebased or
// merged: before, both reviewer robots approved and the robot merged the
// change into production. Checked before the approvals (retargeted while
// the pipeline runs, or while the approval system decides), before the
// merge (retargeted while a failed merge call waits for its retry), and on
// the hook with changes.target_branch (a change waiting in HANDLE_DRAFT).
// Retargeted back, /retry merges it into main.
func TestRetargetedChangeStops(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// reach drives a change to where a person retargets it and
		// returns it; writes is how many robot writes it made there.
		reach func(t *testing.T, h *flowtest.Harness, rig retargetRig) store.Operation
		// after drives the change on once it was retargeted and returns
		// the source of its move into HANDLE_RETARGETED it expects.
		after func(t *testing.T, h *flowtest.Harness, op store.Operation) string
	}{
		{name: "while the MR pipeline runs: before the approvals",
			reach: func(t *testing.T, h *flowtest.Harness, _ retargetRig) store.Operation {
				return h.ToMROpened(t, flowtest.Change("svc"))
			},
			after: func(t *testing.T, h *flowtest.Harness, op store.Operation) string {
				h.DeliverWebhooks(t) // the pipeline's and the retarget's
				h.RunFor(t, time.Minute)
				return "job:" + rules.KindHandle
			}},
		{name: "while the approval system decides (MR first): before the approvals",
			reach: func(t *testing.T, h *flowtest.Harness, _ retargetRig) store.Operation {
				p := flowtest.Change("svc")
				p.ApprovalFirst = false
				op := h.ToMROpened(t, p)
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				return h.RequireStep(t, op.ID, rules.ApprovalSent)
			},
			after: func(t *testing.T, h *flowtest.Harness, op store.Operation) string {
				h.DeliverWebhooks(t) // the retarget's: nothing moves while the approver decides
				h.WorkUntilIdle(t)
				h.RequireStep(t, op.ID, rules.ApprovalSent)
				if res := h.Decide(t, op.ID, rules.DecisionApproved); res != rules.ResultAccepted {
					t.Fatalf("approving: %s", res)
				}
				h.RunFor(t, time.Minute)
				return "job:" + rules.KindHandle
			}},
		{name: "approved, while the merge waits for its retry: before the merge",
			reach: func(t *testing.T, h *flowtest.Harness, rig retargetRig) store.Operation {
				rig.failMerge(h)
				op := h.ToMROpened(t, flowtest.Change("svc"))
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				return h.RequireStep(t, op.ID, rules.HandleApproved)
			},
			after: func(t *testing.T, h *flowtest.Harness, op store.Operation) string {
				h.TakeWebhooks(t) // lost: the merge job's own read finds it
				h.RunFor(t, time.Minute)
				return "job:" + rules.KindHandle
			}},
		{name: "waiting for a draft to be marked ready: on the hook",
			reach: func(t *testing.T, h *flowtest.Harness, rig retargetRig) store.Operation {
				op := h.ToMROpened(t, flowtest.Change("svc"))
				rig.draft(h, op, true)
				h.DeliverWebhooks(t)
				h.WorkUntilIdle(t)
				return h.RequireStep(t, op.ID, rules.HandleDraft)
			},
			after: func(t *testing.T, h *flowtest.Harness, op store.Operation) string {
				h.DeliverWebhooks(t) // no time passes: the draft's poll is not due
				h.WorkUntilIdle(t)
				return "webhook:"
			}},
	}
	for _, rig := range []retargetRig{gitlabRetarget, githubRetarget} {
		for _, tc := range cases {
			t.Run(rig.platform+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				h := flowtest.New(t, &flowtest.Opts{Platform: rig.platform})
				op := tc.reach(t, h, rig)
				writes := rig.writes(h)
				h.Retarget(t, op.ID, "production", flowtest.Requester)
				source := tc.after(t, h, op)

				got := h.RequireStep(t, op.ID, rules.HandleRetargeted)
				ref := "!1"
				if rig.platform == store.PlatformGitHub {
					ref = "#1"
				}
				if want := ref + " now targets production; retarget it to main and comment /retry, or /cancel"; got.Detail != want {
					t.Errorf("detail %q, want %q", got.Detail, want)
				}
				if n := rig.writes(h) - writes; n != 0 {
					t.Errorf("%d approve, merge or rebase calls after the retarget, want none", n)
				}
				if branch, state := rig.target(t, h, op.ID); branch != "production" || state != platform.MRStateOpened {
					t.Errorf("the request targets %s and is %s, want production and opened", branch, state)
				}
				evs := h.Events(t, op.ID)
				last := evs[len(evs)-1]
				for _, e := range evs {
					if rules.StepCode(e.ToStep) == rules.HandleRetargeted && e.Type == store.EventTransition {
						last = e
						break
					}
				}
				if !strings.HasPrefix(last.Source, source) {
					t.Errorf("moved to HANDLE_RETARGETED from %q, want %s…", last.Source, source)
				}
				wantBinding(t, h, op.ID, store.StatusHandleFailed)

				// /retry while it still targets production stops it again.
				if _, err := h.Engine.Act(context.Background(), op.ID, rules.ActionRetry, rules.ActionParams{Actor: flowtest.Requester, Source: "api"}); err != nil {
					t.Fatalf("/retry: %v", err)
				}
				h.RunFor(t, time.Minute)
				h.RequireStep(t, op.ID, rules.HandleRetargeted)
				if n := rig.writes(h) - writes; n != 0 {
					t.Errorf("%d approve, merge or rebase calls after /retry on production, want none", n)
				}

				// Retargeted back (and ready), /retry merges it into main.
				h.Retarget(t, op.ID, "main", flowtest.Requester)
				rig.draft(h, op, false)
				h.TakeWebhooks(t)
				if _, err := h.Engine.Act(context.Background(), op.ID, rules.ActionRetry, rules.ActionParams{Actor: flowtest.Requester, Source: "api"}); err != nil {
					t.Fatalf("/retry after retargeting back: %v", err)
				}
				if got := h.RunUntil(t, op.ID, rules.HandleMerged, 10*time.Minute); got.MergeCommitSHA == "" {
					t.Error("merged without a merge commit")
				}
				if branch, state := rig.target(t, h, op.ID); branch != "main" || state != platform.MRStateMerged {
					t.Errorf("the request targets %s and is %s, want main and merged", branch, state)
				}
			})
		}
	}
}
