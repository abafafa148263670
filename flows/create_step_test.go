package flows_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"changebot/flows"
	"changebot/platform/approval"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
	"changebot/store/storetest"
	"changebot/templates"
)

// gitlabSetup is an engine on real PostgreSQL and a fake GitLab holding the
// project "g/r" (with files, when given) that the robot maintains.
type gitlabSetup struct {
	setup
	fake    *gitlabfake.Server
	project gitlabfake.Project
}

func newGitLabSetup(t *testing.T, files map[string]string) gitlabSetup {
	t.Helper()
	sc := storetest.New(t)
	st, err := store.New(sc.Pool, &store.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	fake := gitlabfake.New(gitlabfake.Options{})
	t.Cleanup(fake.Close)
	fake.AddUser("robot", "tok", gitlabfake.AsBot())
	p := fake.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "g/r", Files: files,
		Members: map[string]int{"robot": gitlabfake.AccessMaintainer}})
	gl, err := gitlab.New(gitlab.Config{BaseURL: fake.URL(), Token: "tok", RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := templates.NewRenderer(nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := flows.NewEngine(flows.EngineConfig{Store: st, GitLab: gl, Renderer: r,
		Approvals: approval.New("http://127.0.0.1:1", nil)})
	if err != nil {
		t.Fatal(err)
	}
	return gitlabSetup{setup: setup{engine: e, store: st, sc: sc}, fake: fake, project: p}
}

// atCreate submits a change of files for "g/r" and moves it to
// CREATE_STARTED, where the create job runs.
func (s gitlabSetup) atCreate(t *testing.T, subject string, files []store.File) store.Operation {
	t.Helper()
	op, created, err := s.engine.Submit(context.Background(), flows.SubmitParams{SubjectID: subject, TargetKey: "prod",
		Project: "g/r", Title: "t", RequestedBy: "alice", ApprovalFirst: true, Files: files})
	if err != nil || !created {
		t.Fatalf("Submit: %v", err)
	}
	return walk(t, s.setup, op, flows.ApprovalSent, flows.CreateStarted)
}

func (s gitlabSetup) read(t *testing.T, op store.Operation) store.Operation {
	t.Helper()
	got, err := s.store.GetOperation(context.Background(), s.sc.Pool, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCreateDecidesFileActionsFromOneTreeListing (issue 9 defect 3): a
// change of 300 files without an action, half of them existing, is
// committed with "update" for the existing ones and "create" for the others,
// decided from the repository tree listing (a few paginated requests), not
// from one raw-file read per file.
func TestCreateDecidesFileActionsFromOneTreeListing(t *testing.T) {
	t.Parallel()
	existing := map[string]string{}
	var files []store.File
	for i := range 150 {
		existing[fmt.Sprintf("cfg/old/%03d.yaml", i)] = "v: 0\n"
		files = append(files, store.File{Path: fmt.Sprintf("cfg/old/%03d.yaml", i), Content: "v: 1\n"},
			store.File{Path: fmt.Sprintf("cfg/new/%03d.yaml", i), Content: "v: 1\n"})
	}
	s := newGitLabSetup(t, existing)
	op := s.atCreate(t, "many-files", files)
	if err := s.engine.RunJob(t.Context(), flows.KindCreateMR, op.ID, flows.CreateStarted, 1, flows.MaxAttempts); err != nil {
		t.Fatalf("create job: %v", err)
	}
	if got := s.read(t, op); flows.StepCode(got.Step) != flows.CreateMROpened {
		t.Fatalf("step = %s (%s); want CREATE_MR_OPENED (existing files updated, new ones created)", flows.StepCode(got.Step), got.Detail)
	}
	if n := s.fake.CallCount("GET", "/api/v4/projects/*/repository/files/*/raw"); n != 0 {
		t.Errorf("%d raw-file reads; want none", n)
	}
	if n := s.fake.CallCount("GET", "/api/v4/projects/*/repository/tree"); n < 1 || n > 4 {
		t.Errorf("%d tree requests; want one listing of cfg (152 entries: at most 2 pages)", n)
	}
}

// TestTimedOutJobWritesItsDeclaredState (issue 9 defect 3): when GitLab
// hangs until the job's context expires on its last attempt, the job's
// declared failure (create) or pending step (pipeline wait) is still
// written, on a fresh bounded context, instead of leaving the change in
// progress with no job for the sweeper to re-queue forever.
func TestTimedOutJobWritesItsDeclaredState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kind string
		path []flows.StepCode // from CREATE_STARTED
		want flows.StepCode
	}{
		{name: "create", kind: flows.KindCreateMR, want: flows.CreateFailed},
		{name: "pipeline wait", kind: flows.KindAwaitPipeline, path: []flows.StepCode{flows.CreateMROpened}, want: flows.CreatePipelinePending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newGitLabSetup(t, nil)
			op := s.atCreate(t, "hang-"+tt.kind, []store.File{{Path: "a.yaml", Content: "a: 1"}})
			op = walk(t, s.setup, op, tt.path...)
			s.fake.SetLatency(time.Hour) // GitLab hangs
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			_ = s.engine.RunJob(ctx, tt.kind, op.ID, flows.StepCode(op.Step), flows.MaxAttempts, flows.MaxAttempts)
			if ctx.Err() == nil {
				t.Fatal("the job ended before its context expired; the test did not make GitLab hang")
			}
			if got := s.read(t, op); flows.StepCode(got.Step) != tt.want {
				t.Fatalf("step = %s; want %s written after the job's context expired", flows.StepCode(got.Step), tt.want)
			}
		})
	}
}
