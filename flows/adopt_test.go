package flows_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// fixedBinding is a flows.BindingDeriver answering b for every merge
// request and counting its calls.
type fixedBinding struct {
	b     flows.AdoptedBinding
	calls *int
}

func (f fixedBinding) AdoptBinding(context.Context, int64, int64, string) (flows.AdoptedBinding, error) {
	*f.calls++
	return f.b, nil
}

// adoptHarness is a harness where adoption is on for flowtest.ProjectPath
// (projects: the allowed paths), with bindings answering b.
func adoptHarness(t *testing.T, projects []string, b flows.AdoptedBinding) (*flowtest.Harness, *int) {
	t.Helper()
	calls := new(int)
	h := flowtest.New(t, &flowtest.Opts{Configure: func(cfg *flows.EngineConfig) {
		cfg.Adopt = flows.AdoptConfig{Projects: projects, Bindings: fixedBinding{b, calls}}
	}})
	return h, calls
}

// devMR opens a merge request by author in h's project.
func devMR(t *testing.T, h *flowtest.Harness, author, branch string) int64 {
	t.Helper()
	iid := h.GitLab.OpenMRAsUser(gitlabfake.DeveloperMR{ProjectID: h.Project.ID, Username: author, SourceBranch: branch,
		TargetBranch: h.Project.DefaultBranch, Title: "By hand", Files: map[string]string{"services/svc.yaml": "replicas: 3\n"}})
	if iid == 0 {
		t.Fatal("no merge request opened")
	}
	return iid
}

var bound = flows.AdoptedBinding{SubjectID: "svc", TargetKey: "prod", OK: true}

// TestAdoptRefusals: each rule that keeps a merge request from being
// adopted answers an *AdoptRefusedError naming why, and creates nothing.
func TestAdoptRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		projects []string
		binding  flows.AdoptedBinding
		// setup prepares the merge request and returns its iid.
		setup func(t *testing.T, h *flowtest.Harness) int64
		want  string
	}{
		{"adoption off in the project", []string{"other/repo"}, bound,
			func(t *testing.T, h *flowtest.Harness) int64 { return devMR(t, h, "dana", "dana/a") },
			"adoption is not turned on for " + flowtest.ProjectPath},
		{"opened by the robot", []string{flowtest.ProjectPath}, bound,
			func(t *testing.T, h *flowtest.Harness) int64 { return devMR(t, h, flowtest.Robot, "robot/a") },
			"opened by the robot itself"},
		{"closed", []string{flowtest.ProjectPath}, bound,
			func(t *testing.T, h *flowtest.Harness) int64 {
				iid := devMR(t, h, "dana", "dana/b")
				if _, err := h.Client.CloseMergeRequest(context.Background(), h.Project.ID, iid); err != nil {
					t.Fatal(err)
				}
				return iid
			},
			"is closed, not open"},
		{"paths give no single binding", []string{flowtest.ProjectPath},
			flows.AdoptedBinding{Reason: "no path rule of .changebot.yml matches docs/x.md"},
			func(t *testing.T, h *flowtest.Harness) int64 { return devMR(t, h, "dana", "dana/c") },
			"no path rule of .changebot.yml matches docs/x.md"},
		{"binding busy with another change", []string{flowtest.ProjectPath}, bound,
			func(t *testing.T, h *flowtest.Harness) int64 {
				h.Submit(t, flowtest.Change("svc"))
				return devMR(t, h, "dana", "dana/d")
			},
			"binding svc / prod is busy with another change, op_"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, _ := adoptHarness(t, tc.projects, tc.binding)
			iid := tc.setup(t, h)
			_, created, err := h.Engine.Adopt(context.Background(), flows.AdoptParams{ProjectID: h.Project.ID, IID: iid, By: "dana",
				Via: flows.AdoptViaLabel, Source: "test"})
			reason, refused := flows.AdoptRefusal(err)
			if !refused || created || !strings.Contains(reason, tc.want) {
				t.Fatalf("Adopt = created %v, %v; want a refusal containing %q", created, err, tc.want)
			}
			if _, err := h.Engine.FindByMR(context.Background(), h.Project.ID, iid); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("FindByMR after a refusal: %v, want store.ErrNotFound", err)
			}
		})
	}
}

// TestAdoptCreatesOnceAndRecordsTheMergeRequest: an adoption creates one
// change for the merge request (a second one answers it), whose create step
// records the merge request and pushes nothing; letting it go closes the
// change and leaves the merge request open.
func TestAdoptCreatesOnceAndRecordsTheMergeRequest(t *testing.T) {
	t.Parallel()
	h, calls := adoptHarness(t, []string{strings.ToUpper(flowtest.ProjectPath)}, bound)
	// The pipeline keeps running: the change waits at CREATE_MR_OPENED.
	h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"running"}})
	iid := devMR(t, h, "dana", "dana/e")
	mr, _ := h.GitLab.MergeRequest(h.Project.ID, iid)
	p := flows.AdoptParams{ProjectID: h.Project.ID, IID: iid, By: "dana", Via: flows.AdoptViaLabel, Source: "test"}
	op, created, err := h.Engine.Adopt(context.Background(), p)
	if err != nil || !created {
		t.Fatalf("Adopt = created %v, %v", created, err)
	}
	if !op.Adopted || op.MRIID != iid || op.HeadSHA != mr.SHA || op.SourceBranch != "dana/e" || op.RequestedBy != "dana" ||
		rules.StepCode(op.Step) != rules.CreateStarted {
		t.Fatalf("adopted change %+v", op)
	}
	p.Via = flows.AdoptViaCommand
	again, created, err := h.Engine.Adopt(context.Background(), p)
	if err != nil || created || again.ID != op.ID || *calls != 1 {
		t.Fatalf("second Adopt = %s created %v, %v (%d binding reads); want the first change, not created, one read", again.ID, created, err, *calls)
	}
	h.RunUntil(t, op.ID, rules.CreateMROpened, 0)
	got := h.Op(t, op.ID)
	if got.MRIID != iid || got.HeadSHA != mr.SHA {
		t.Fatalf("after the create step: MR !%d head %s, want !%d at %s", got.MRIID, got.HeadSHA, iid, mr.SHA)
	}
	if n := h.GitLab.CallCount("POST", "/api/v4/projects/*/repository/commits") + h.GitLab.CallCount("POST", "/api/v4/projects/*/merge_requests") +
		h.GitLab.CallCount("POST", "/api/v4/projects/*/repository/branches"); n != 0 {
		t.Errorf("%d branch, commit or merge request writes by the create step of an adopted change, want none", n)
	}
	if _, err := h.Engine.LetGo(context.Background(), got, rules.ActionParams{Actor: "dana", Source: "test", Command: "unlabel"}); err != nil {
		t.Fatal(err)
	}
	closed := h.RequireStep(t, op.ID, rules.Closed)
	if !strings.HasPrefix(closed.Detail, "let go (the merge request stays open") {
		t.Errorf("detail %q, want it to say the robot let go", closed.Detail)
	}
	if snap, _ := h.GitLab.MergeRequest(h.Project.ID, iid); snap.State != "opened" || !h.GitLab.HasBranch(h.Project.ID, "dana/e") {
		t.Errorf("merge request %s, branch kept %v; want it open with its branch", snap.State, h.GitLab.HasBranch(h.Project.ID, "dana/e"))
	}
	// Let go, it may be adopted again.
	if _, created, err := h.Engine.Adopt(context.Background(), p); err != nil || !created {
		t.Fatalf("Adopt after letting go = created %v, %v; want a new change", created, err)
	}
}

// TestAdoptRetryRunsThePipelineAgain: an adopted change whose pipeline
// failed, /retry-ed without a new push, runs the head's pipeline again (as
// a robot's merge request does) and goes on once it passes; its first
// create step runs none of its own.
func TestAdoptRetryRunsThePipelineAgain(t *testing.T) {
	t.Parallel()
	h, _ := adoptHarness(t, []string{flowtest.ProjectPath}, bound)
	h.GitLab.SetPipelineScript(h.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed", "success"}})
	iid := devMR(t, h, "dana", "dana/flaky")
	op, _, err := h.Engine.Adopt(context.Background(), flows.AdoptParams{ProjectID: h.Project.ID, IID: iid, By: "dana",
		Via: flows.AdoptViaLabel, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	h.RunUntil(t, op.ID, rules.CreatePipelineFailed, time.Hour)
	runs := func() int { return h.GitLab.CallCount("POST", "/api/v4/projects/*/merge_requests/*/pipelines") }
	if n := runs(); n != 0 {
		t.Fatalf("%d pipelines started by the robot before the retry, want none", n)
	}
	if _, err := h.Engine.Act(context.Background(), op.ID, rules.ActionRetry, rules.ActionParams{Actor: "dana", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	h.RunUntil(t, op.ID, rules.ApprovalSent, time.Hour) // past its passed pipeline (MR first)
	if n := runs(); n != 1 {
		t.Errorf("%d pipelines started by the retry, want 1", n)
	}
}
