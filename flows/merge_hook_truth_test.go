package flows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// forgedMRHook is a Merge Request Hook GitLab did not send: the recorded
// payload file (testdata/gitlab, a real GitLab delivery) edited to name
// project projectID and merge request iid, as anyone holding the webhook's
// secret token could post it.
func forgedMRHook(t *testing.T, file string, projectID, iid int64) gitlabfake.SentWebhook {
	t.Helper()
	raw, err := os.ReadFile("../testdata/gitlab/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	body["project"].(map[string]any)["id"] = projectID
	attrs := body["object_attributes"].(map[string]any)
	attrs["iid"], attrs["target_project_id"], attrs["source_project_id"] = iid, projectID, projectID
	out, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return gitlabfake.SentWebhook{Event: "Merge Request Hook", IdempotencyKey: "forged-" + file, ProjectID: projectID, Body: out}
}

// contradictedCount reads changebot_webhooks_contradicted_total by action.
func contradictedCount(t *testing.T, h *flowtest.Harness) map[string]float64 {
	t.Helper()
	mfs, err := h.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "changebot_webhooks_contradicted_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" && m.GetCounter().GetValue() > 0 {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// forgedPullHook is forgedMRHook on GitHub: the recorded pull_request
// delivery file (testdata/github, GitHub's) edited to name repository
// repoID and pull request number.
func forgedPullHook(t *testing.T, file string, repoID, number int64) gitlabfake.SentWebhook {
	t.Helper()
	raw, err := os.ReadFile("../testdata/github/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	body["number"] = number
	body["repository"].(map[string]any)["id"] = repoID
	body["pull_request"].(map[string]any)["number"] = number
	out, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return gitlabfake.SentWebhook{Event: "pull_request", IdempotencyKey: "forged-" + file, ProjectID: repoID, Body: out}
}

// mergeHookRig is what TestMergeHookIsCheckedWithThePlatform needs of one
// platform: a forged merge and close hook, the request's state as the fake
// shows it, a person's merge, and the name of the request's own hooks.
type mergeHookRig struct {
	platform string
	forged   func(t *testing.T, h *flowtest.Harness, iid int64) []gitlabfake.SentWebhook
	state    func(t *testing.T, h *flowtest.Harness, id string) string
	hook     string
}

var mergeHookRigs = []mergeHookRig{
	{platform: store.PlatformGitLab, hook: "Merge Request Hook",
		forged: func(t *testing.T, h *flowtest.Harness, iid int64) []gitlabfake.SentWebhook {
			return []gitlabfake.SentWebhook{forgedMRHook(t, "webhook-merge_request-merge.json", h.Project.ID, iid),
				forgedMRHook(t, "webhook-merge_request-close.json", h.Project.ID, iid)}
		},
		state: func(t *testing.T, h *flowtest.Harness, id string) string { return h.MR(t, id).State }},
	{platform: store.PlatformGitHub, hook: "pull_request",
		forged: func(t *testing.T, h *flowtest.Harness, iid int64) []gitlabfake.SentWebhook {
			return []gitlabfake.SentWebhook{forgedPullHook(t, "webhook-pull_request-closed-merged.json", h.Repo.ID, iid),
				forgedPullHook(t, "webhook-pull_request-closed-unmerged.json", h.Repo.ID, iid)}
		},
		state: func(t *testing.T, h *flowtest.Harness, id string) string {
			if pr := h.PR(t, id); pr.State == "open" {
				return platform.MRStateOpened
			} else if pr.Merged {
				return platform.MRStateMerged
			}
			return platform.MRStateClosed
		}},
}

// TestMergeHookIsCheckedWithThePlatform: a change waits for its approval
// (APPROVAL_SENT) on an open merge request; a webhook saying "merged", and
// one saying "closed", arrive although the platform says the request is
// open (GitLab: Merge Request Hooks; GitHub, on githubfake: pull_request
// closed with merged true and false). Before, the merge hook was believed:
// the change became MERGED on a merge commit that does not exist, no
// deploy could ever confirm it, and it could neither be cancelled nor
// resumed out of it. Now the request is read first: nothing moves, it
// stays open, each contradiction is counted (the merge hook's once its few
// re-reads still find it open). Once a person really merges, the change
// moves on with the platform's merge commit.
func TestMergeHookIsCheckedWithThePlatform(t *testing.T) {
	t.Parallel()
	for _, rig := range mergeHookRigs {
		t.Run(rig.platform, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, &flowtest.Opts{Platform: rig.platform})
			p := flowtest.Change("svc")
			p.ApprovalFirst = false
			op := h.ToMROpened(t, p)
			h.DeliverWebhooks(t)
			h.WorkUntilIdle(t)
			h.RequireStep(t, op.ID, rules.ApprovalSent)

			h.Deliver(t, rig.forged(t, h, op.MRIID)...)
			h.RunFor(t, 10*time.Second) // the merge hook is read again a few times before it is contradicted
			got := h.RequireStep(t, op.ID, rules.ApprovalSent)
			if got.MergeCommitSHA != "" {
				t.Errorf("merge commit %q recorded from a webhook the platform contradicts", got.MergeCommitSHA)
			}
			if state := rig.state(t, h, op.ID); state != platform.MRStateOpened {
				t.Fatalf("request state %s, want opened", state)
			}
			if c := contradictedCount(t, h); c["merge"] != 1 || c["close"] != 1 {
				t.Errorf("contradicted webhooks counted %v, want merge 1, close 1", c)
			}

			// A real merge by a person: the platform's merge commit is kept.
			var merged platform.MergeRequest
			var err error
			if rig.platform == store.PlatformGitHub {
				merged, err = h.GitHubClientAs(t, flowtest.Requester).Merge(context.Background(), op.ProjectID, op.MRIID,
					platform.MergeParams{SHA: h.PR(t, op.ID).HeadSHA})
			} else {
				merged, err = h.ClientAs(t, flowtest.Requester).Merge(context.Background(), h.Project.ID, op.MRIID,
					platform.MergeParams{SHA: h.MR(t, op.ID).SHA})
			}
			if err != nil {
				t.Fatal(err)
			}
			var hooks []gitlabfake.SentWebhook // the request's own (not the deploy pipeline's)
			for _, w := range h.TakeWebhooks(t) {
				if w.Event == rig.hook {
					hooks = append(hooks, w)
				}
			}
			if len(hooks) == 0 {
				t.Fatalf("no %s after the merge", rig.hook)
			}
			h.Deliver(t, hooks...)
			h.WorkUntilIdle(t)
			got = h.RequireStep(t, op.ID, rules.HandleMerged)
			if got.MergeCommitSHA != merged.MergeCommitSHA || got.MergeCommitSHA == "" {
				t.Errorf("merge commit %q, want the platform's %q", got.MergeCommitSHA, merged.MergeCommitSHA)
			}
			if !strings.Contains(got.Detail, flowtest.Requester+" merged") {
				t.Errorf("detail %q does not name who merged", got.Detail)
			}
		})
	}
}

// TestCancelLeavesAMergeGitLabNeverMade: a change recorded MERGED whose
// merge request GitLab says is still opened (what a believed forged merge
// webhook left before the check, put here directly) waits for a deploy of
// a merge commit that does not exist and parks in DEPLOY_PENDING; /resume
// only goes round. /cancel reads the MR: GitLab says opened, so the MR is
// closed and the change CLOSED, freeing its binding. A change GitLab shows
// merged still cannot be cancelled.
func TestCancelLeavesAMergeGitLabNeverMade(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	ctx := context.Background()
	p := flowtest.Change("svc")
	p.ApprovalFirst = false
	op := h.ToMROpened(t, p)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	op = h.RequireStep(t, op.ID, rules.ApprovalSent)
	const bogus = "43411b53d670203e887c4985c4e58e8e6b7c109e"
	if _, err := h.Engine.Transition(ctx, op, rules.HandleMerged, flows.TransitionOpts{Source: "webhook:0",
		Update: func(o *store.Operation) { o.MergeCommitSHA = bogus }}); err != nil {
		t.Fatal(err)
	}
	h.RunFor(t, flowtest.Poll.DeployDeadline+time.Hour)
	h.RequireStep(t, op.ID, rules.DeployPending)

	got, err := h.Engine.Act(ctx, op.ID, rules.ActionCancel, rules.ActionParams{Actor: "olivia", Source: "api"})
	if err != nil {
		t.Fatalf("cancel of a change GitLab never merged: %v", err)
	}
	if rules.StepCode(got.Step) != rules.Closed || !strings.Contains(got.Detail, "never merged (opened)") {
		t.Errorf("after cancel: %s %q, want CLOSED saying GitLab never merged it", rules.StepCode(got.Step), got.Detail)
	}
	if mr := h.MR(t, op.ID); mr.State != platform.MRStateClosed {
		t.Errorf("MR state %s, want closed", mr.State)
	}
	wantBinding(t, h, op.ID, store.StatusClosed)

	// A change GitLab shows merged stays MERGED.
	real := h.ToMerged(t, flowtest.Change("svc"))
	if _, err := h.Engine.Act(ctx, real.ID, rules.ActionCancel, rules.ActionParams{Actor: "olivia", Source: "api"}); !errors.Is(err, rules.ErrNotApplicable) {
		t.Errorf("cancel of a merged change: %v, want ErrNotApplicable", err)
	}
	h.RequireStep(t, real.ID, rules.HandleMerged)
}

// TestOwnMergeHookCostsNoRead: the change's merge job is running
// (HANDLE_APPROVED: here it is held between its merge call and recording
// the merge) when the merge request's merge hook, the hook of that very
// merge, is processed. The hook is applied again shortly instead of reading
// the merge request a second time: the job records the merge, and the
// repeated hook is then a no-op without a read. Before, the hook read the
// merge request at once: a fourth read per change, which bot's
// TestEndToEndReachesValidated saw when the hook beat the job's transition.
func TestOwnMergeHookCostsNoRead(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	ctx := context.Background()
	handle := h.Engine.WorkFuncs()[rules.KindHandle]
	var hold atomic.Bool
	h.AddWorkFunc(rules.KindHandle, func(ctx context.Context, job *rivertype.JobRow) error {
		if hold.Load() {
			return river.JobSnooze(time.Second)
		}
		return handle(ctx, job)
	})
	p := flowtest.Change("svc")
	p.ApprovalFirst = false
	op := h.ToMROpened(t, p)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.ApprovalSent)
	// The job's first merge call fails (503): the change stays
	// HANDLE_APPROVED with its job to run again, which the test holds.
	h.GitLab.InjectFault(gitlabfake.Fault{Method: "PUT", PathPattern: fmt.Sprintf("/api/v4/projects/%d/merge_requests/%d/merge", h.Project.ID, op.MRIID),
		Status: 503, Times: 1})
	h.Decide(t, op.ID, "approved")
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.HandleApproved)
	hold.Store(true)
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)

	// The job's merge call, made as the robot: GitLab merges and sends the hook.
	if _, err := h.ClientAs(t, flowtest.Robot).Merge(ctx, h.Project.ID, op.MRIID, platform.MergeParams{SHA: h.MR(t, op.ID).SHA}); err != nil {
		t.Fatal(err)
	}
	var hooks []gitlabfake.SentWebhook
	for _, w := range h.TakeWebhooks(t) {
		if w.Event == "Merge Request Hook" {
			hooks = append(hooks, w)
		}
	}
	if len(hooks) == 0 {
		t.Fatal("no merge request hook for the merge")
	}
	reads := func() int { return h.GitLab.CallCount("GET", "/api/v4/projects/*/merge_requests/*") }
	before := reads()
	h.Deliver(t, hooks...)
	h.WorkUntilIdle(t)
	if n := reads() - before; n != 0 {
		t.Fatalf("the merge hook read the merge request %d times while the change's merge job ran; want 0", n)
	}
	h.RequireStep(t, op.ID, rules.HandleApproved)

	hold.Store(false)
	h.RunFor(t, 10*time.Second)
	got := h.Op(t, op.ID)
	if s := rules.StepCode(got.Step); s != rules.HandleMerged && s != rules.CalledBack {
		t.Fatalf("step %s after the merge job; want HANDLE_MERGED or later", s)
	}
	if got.MergeCommitSHA == "" {
		t.Error("no merge commit recorded")
	}
}
