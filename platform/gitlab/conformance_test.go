package gitlab_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
)

const (
	robotToken     = "conformance-robot-token"
	reviewerTokenA = "conformance-reviewer-a-token"
	reviewerTokenB = "conformance-reviewer-b-token"
	statusMarker   = "<!-- changebot:status op_01CONFORMANCE -->"
)

// suite is the shared setup of the conformance suite: a fake GitLab with
// the robot, two reviewer robots and one project, and the adapter pointed at
// it (STYLE.md rule 35). The platform-neutral walk, in error kinds, is
// platform/platformtest, run for GitLab by TestPlatformConformance; the
// tests here keep what is GitLab's own: exact statuses and messages, the
// merge request pipelines list, the call budget and the fault retries.
type suite struct {
	srv     *gitlabfake.Server
	c       *gitlab.Client
	project gitlabfake.Project
	robot   gitlabfake.User
	revA    gitlabfake.User
	revB    gitlabfake.User
}

func setup(t *testing.T) suite {
	t.Helper()
	srv := gitlabfake.New(gitlabfake.Options{})
	t.Cleanup(srv.Close)
	f := suite{srv: srv}
	f.robot = srv.AddUser("changebot", robotToken, gitlabfake.AsBot())
	f.revA = srv.AddUser("reviewer-a", reviewerTokenA, gitlabfake.AsBot())
	f.revB = srv.AddUser("reviewer-b", reviewerTokenB, gitlabfake.AsBot())
	f.project = srv.AddProject(gitlabfake.ProjectSpec{
		PathWithNamespace: "group/config",
		Members: map[string]int{
			"changebot":  gitlabfake.AccessMaintainer,
			"reviewer-a": gitlabfake.AccessDeveloper,
			"reviewer-b": gitlabfake.AccessDeveloper,
		},
		ApprovalsRequired: 2,
	})
	c, err := gitlab.New(gitlab.Config{
		BaseURL:        srv.URL() + "/api/v4/",
		Token:          robotToken,
		ReviewerTokens: []string{reviewerTokenA, reviewerTokenB},
		RetryWaitMin:   time.Millisecond,
		RetryWaitMax:   10 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("gitlab.New: %v", err)
	}
	f.c = c
	return f
}

// waitIdle lets the fake finish pipelines and rebases.
func (f suite) waitIdle(t *testing.T) {
	t.Helper()
	if err := f.srv.WaitIdle(t.Context()); err != nil {
		t.Fatalf("WaitIdle: %v", err)
	}
}

// requireStatus fails unless err is a *platform.Error with status and a
// message starting with msgPrefix, carrying no token.
func requireStatus(t *testing.T, err error, status int, msgPrefix string) {
	t.Helper()
	var pe *platform.Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v; want a *platform.Error with status %d", err, status)
	}
	if pe.Status != status || !strings.HasPrefix(pe.Message, msgPrefix) {
		t.Errorf("platform.Error{Status:%d Message:%q}; want %d %q…", pe.Status, pe.Message, status, msgPrefix)
	}
	for _, tok := range []string{robotToken, reviewerTokenA, reviewerTokenB} {
		if strings.Contains(err.Error(), tok) {
			t.Errorf("error leaks a token: %v", err)
		}
	}
}

// TestConformanceHappyPath walks one change through the adapter against the
// fake: identify the robots, read the project, branch, commit, open the MR,
// pass its pipeline, comment, approve as two reviewers, merge, and find the
// deploy pipeline of the merge commit.
func TestConformanceHappyPath(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	c := f.c

	// Robots.
	robot, err := c.CurrentUser(ctx)
	if err != nil || robot != (platform.User{ID: f.robot.ID, Username: "changebot"}) {
		t.Fatalf("CurrentUser = %+v, %v", robot, err)
	}
	for i, want := range []gitlabfake.User{f.revA, f.revB} {
		u, err := c.Reviewer(ctx, i)
		if err != nil || u != (platform.User{ID: want.ID, Username: want.Username}) {
			t.Fatalf("Reviewer(%d) = %+v, %v; want %+v", i, u, err, want)
		}
	}

	// Project and access.
	for _, ref := range []string{"group/config", strconv.FormatInt(f.project.ID, 10)} {
		p, err := c.Project(ctx, ref)
		if err != nil || p.ID != f.project.ID || p.PathWithNamespace != "group/config" || p.DefaultBranch != "main" {
			t.Fatalf("Project(%q) = %+v, %v", ref, p, err)
		}
	}
	if _, err := c.Project(ctx, "group/missing"); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("Project(missing) err = %v; want ErrNotFound", err)
	}
	if lvl, err := c.MemberAccess(ctx, f.project.ID, f.revA.ID); err != nil || lvl != gitlabfake.AccessDeveloper {
		t.Errorf("MemberAccess(reviewer-a) = %d, %v; want 30", lvl, err)
	}
	outsider := f.srv.AddUser("outsider", "outsider-token")
	if lvl, err := c.MemberAccess(ctx, f.project.ID, outsider.ID); err != nil || lvl != 0 {
		t.Errorf("MemberAccess(outsider) = %d, %v; want 0, nil", lvl, err)
	}

	// Branch and commit.
	pid := f.project.ID
	main, err := c.Branch(ctx, pid, "main")
	if err != nil || main.CommitSHA == "" {
		t.Fatalf("Branch(main) = %+v, %v", main, err)
	}
	const branch = "changebot/op_01CONFORMANCE"
	if _, err := c.Branch(ctx, pid, branch); !errors.Is(err, platform.ErrNotFound) {
		t.Fatalf("Branch(new) err = %v; want ErrNotFound", err)
	}
	b, err := c.CreateBranch(ctx, pid, branch, "main")
	if err != nil || b.Name != branch || b.CommitSHA != main.CommitSHA {
		t.Fatalf("CreateBranch = %+v, %v; want %s at %s", b, err, branch, main.CommitSHA)
	}
	_, err = c.CreateBranch(ctx, pid, branch, "main")
	requireStatus(t, err, 400, "Branch already exists")

	commit, err := c.CreateCommit(ctx, pid, platform.CommitParams{
		Branch: branch, Message: "Apply op_01CONFORMANCE",
		Actions: []platform.FileAction{{Action: "create", FilePath: "services/api.yaml", Content: "replicas: 3\n"}},
	})
	if err != nil || commit.SHA == "" || len(commit.ParentIDs) != 1 || commit.ParentIDs[0] != main.CommitSHA {
		t.Fatalf("CreateCommit = %+v, %v; want one parent %s", commit, err, main.CommitSHA)
	}
	if got, err := c.Commit(ctx, pid, commit.SHA); err != nil || got.SHA != commit.SHA || got.Title != "Apply op_01CONFORMANCE" {
		t.Errorf("Commit = %+v, %v", got, err)
	}
	if b, err := c.Branch(ctx, pid, branch); err != nil || b.CommitSHA != commit.SHA {
		t.Errorf("Branch after commit = %+v, %v; want tip %s", b, err, commit.SHA)
	}
	if ok, err := c.IsAncestor(ctx, pid, main.CommitSHA, commit.SHA); err != nil || !ok {
		t.Errorf("IsAncestor(main, commit) = %v, %v; want true", ok, err)
	}
	if ok, err := c.IsAncestor(ctx, pid, commit.SHA, main.CommitSHA); err != nil || ok {
		t.Errorf("IsAncestor(commit, main) = %v, %v; want false", ok, err)
	}

	// Merge request.
	if _, err := c.FindOpenMergeRequest(ctx, pid, branch); !errors.Is(err, platform.ErrNotFound) {
		t.Fatalf("FindOpenMergeRequest before create err = %v; want ErrNotFound", err)
	}
	params := platform.CreateMRParams{SourceBranch: branch, TargetBranch: "main", Title: "Apply op_01CONFORMANCE", Description: "changebot", RemoveSourceBranch: true}
	mr, err := c.CreateMergeRequest(ctx, pid, params)
	if err != nil || mr.IID == 0 || mr.SHA != commit.SHA || mr.State != platform.MRStateOpened || mr.Author.ID != robot.ID {
		t.Fatalf("CreateMergeRequest = %+v, %v", mr, err)
	}
	_, err = c.CreateMergeRequest(ctx, pid, params)
	requireStatus(t, err, 409, "Another open merge request already exists for this source branch")
	if found, err := c.FindOpenMergeRequest(ctx, pid, branch); err != nil || found.IID != mr.IID {
		t.Fatalf("FindOpenMergeRequest = %+v, %v; want !%d", found, err, mr.IID)
	}

	// Pipelines.
	f.waitIdle(t)
	got, err := c.MergeRequest(ctx, pid, mr.IID, true)
	if err != nil {
		t.Fatalf("MergeRequest: %v", err)
	}
	if got.HeadPipeline == nil || got.HeadPipeline.SHA != commit.SHA || got.HeadPipeline.Status != platform.PipelineSuccess || got.RebaseInProgress {
		t.Fatalf("MergeRequest head pipeline = %+v; want a finished success on %s", got.HeadPipeline, commit.SHA)
	}
	if got.DetailedMergeStatus != "not_approved" {
		t.Errorf("detailed_merge_status before approvals = %q; want not_approved", got.DetailedMergeStatus)
	}
	created, err := c.CreateMergeRequestPipeline(ctx, pid, mr.IID)
	if err != nil || created.ID == 0 || created.SHA != commit.SHA {
		t.Fatalf("CreateMergeRequestPipeline = %+v, %v", created, err)
	}
	f.waitIdle(t)
	pls, err := c.MergeRequestPipelines(ctx, pid, mr.IID)
	if err != nil || len(pls) < 2 || pls[0].ID != created.ID || pls[0].ID <= pls[1].ID {
		t.Fatalf("MergeRequestPipelines = %+v, %v; want newest first, starting with %d", pls, err, created.ID)
	}
	if !pls[0].Finished() {
		t.Errorf("newest MR pipeline %+v not finished after WaitIdle", pls[0])
	}

	// Status comment.
	note, err := c.CreateNote(ctx, pid, mr.IID, "Change is waiting for approval.\n"+statusMarker)
	if err != nil || note.ID == 0 || note.Author.ID != robot.ID {
		t.Fatalf("CreateNote = %+v, %v", note, err)
	}
	if found, err := c.FindNote(ctx, pid, mr.IID, statusMarker); err != nil || found.ID != note.ID {
		t.Fatalf("FindNote = %+v, %v; want note %d", found, err, note.ID)
	}
	if _, err := c.FindNote(ctx, pid, mr.IID, "<!-- changebot:status op_other -->"); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("FindNote(other marker) err = %v; want ErrNotFound", err)
	}
	updated, err := c.UpdateNote(ctx, pid, mr.IID, note.ID, "Change is merging.\n"+statusMarker)
	if err != nil || updated.ID != note.ID || !strings.HasPrefix(updated.Body, "Change is merging.") {
		t.Fatalf("UpdateNote = %+v, %v", updated, err)
	}
	if read, err := c.Note(ctx, pid, mr.IID, note.ID); err != nil || read.Body != updated.Body {
		t.Errorf("Note = %+v, %v; want the updated body", read, err)
	}
	if _, err := c.Note(ctx, pid, mr.IID, note.ID+1000); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("Note(missing) err = %v; want ErrNotFound", err)
	}

	// Approvals: wrong sha is 409, a second approval by the same reviewer is 401.
	if users, err := c.Approvals(ctx, pid, mr.IID); err != nil || len(users) != 0 {
		t.Fatalf("Approvals before = %+v, %v; want none", users, err)
	}
	err = c.Approve(ctx, 0, pid, mr.IID, main.CommitSHA)
	requireStatus(t, err, 409, "SHA does not match HEAD of source branch")
	if err := c.Approve(ctx, 0, pid, mr.IID, commit.SHA); err != nil {
		t.Fatalf("Approve as reviewer 0: %v", err)
	}
	err = c.Approve(ctx, 0, pid, mr.IID, commit.SHA)
	requireStatus(t, err, 401, "401 Unauthorized")
	if platform.IsTransient(err) {
		t.Errorf("401 on double approve counted as transient")
	}
	if err := c.Approve(ctx, 1, pid, mr.IID, commit.SHA); err != nil {
		t.Fatalf("Approve as reviewer 1: %v", err)
	}
	users, err := c.Approvals(ctx, pid, mr.IID)
	want := []platform.User{{ID: f.revA.ID, Username: "reviewer-a"}, {ID: f.revB.ID, Username: "reviewer-b"}}
	if err != nil || len(users) != 2 || users[0] != want[0] || users[1] != want[1] {
		t.Fatalf("Approvals = %+v, %v; want %+v", users, err, want)
	}

	// Merge: wrong sha is 409, then the real merge.
	_, err = c.Merge(ctx, pid, mr.IID, platform.MergeParams{SHA: main.CommitSHA})
	requireStatus(t, err, 409, "SHA does not match HEAD of source branch")
	merged, err := c.Merge(ctx, pid, mr.IID, platform.MergeParams{SHA: commit.SHA})
	if err != nil || merged.State != platform.MRStateMerged {
		t.Fatalf("Merge = %+v, %v; want merged", merged, err)
	}
	target := merged.MergeCommitSHA
	if target == "" {
		target = merged.SHA
	}
	if ok, err := c.IsAncestor(ctx, pid, commit.SHA, "main"); err != nil || !ok {
		t.Errorf("IsAncestor(commit, main) after merge = %v, %v; want true", ok, err)
	}
	if _, err := c.FindOpenMergeRequest(ctx, pid, branch); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("FindOpenMergeRequest after merge err = %v; want ErrNotFound", err)
	}

	// Deploy pipeline of the merge commit on the target branch.
	f.waitIdle(t)
	deploys, err := c.Pipelines(ctx, pid, "main", target)
	if err != nil || len(deploys) == 0 || deploys[0].SHA != target || deploys[0].Ref != "main" {
		t.Fatalf("Pipelines(main, %s) = %+v, %v; want the deploy pipeline", target, deploys, err)
	}
	if all, err := c.Pipelines(ctx, pid, "", ""); err != nil || len(all) < len(deploys)+len(pls) {
		t.Errorf("Pipelines(no filter) = %d pipelines, %v; want at least %d", len(all), err, len(deploys)+len(pls))
	}

	// Call budget (DESIGN.md §9): one approve per reviewer attempt, no retries.
	if n := f.srv.CallCount("POST", "/api/v4/projects/*/merge_requests/*/approve"); n != 4 {
		t.Errorf("approve calls = %d; want 4 (409, ok, 401, ok)", n)
	}
	if n := f.srv.CallCount("GET", "/api/v4/user"); n != 3 {
		t.Errorf("GET /user calls = %d; want 3 (robot and two reviewers, cached)", n)
	}
}

// TestConformanceRebaseAndClose covers the rebase poll and cancel: a push to
// the target makes a fast-forward MR need a rebase; Rebase answers 202 and
// the MR is polled with include_rebase_in_progress until done; a scripted
// conflict surfaces as MergeError; CloseMergeRequest closes.
func TestConformanceRebaseAndClose(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		conflict       bool
		wantMergeError string
	}{
		{name: "rebase succeeds"},
		{name: "rebase conflicts", conflict: true, wantMergeError: "Rebase failed. Please rebase locally"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			ctx := t.Context()
			c := f.c
			pid := f.project.ID
			if _, err := c.CreateBranch(ctx, pid, "feature", "main"); err != nil {
				t.Fatal(err)
			}
			commit, err := c.CreateCommit(ctx, pid, platform.CommitParams{Branch: "feature", Message: "feature",
				Actions: []platform.FileAction{{Action: "create", FilePath: "a.txt", Content: "a"}}})
			if err != nil {
				t.Fatal(err)
			}
			mr, err := c.CreateMergeRequest(ctx, pid, platform.CreateMRParams{SourceBranch: "feature", TargetBranch: "main", Title: "feature"})
			if err != nil {
				t.Fatal(err)
			}
			f.srv.SetRebaseBehavior(pid, mr.IID, gitlabfake.RebaseBehavior{Conflict: tt.conflict})
			f.srv.PushToTarget(pid, "main")
			if err := c.Rebase(ctx, pid, mr.IID); err != nil {
				t.Fatalf("Rebase: %v", err)
			}
			f.waitIdle(t)
			got, err := c.MergeRequest(ctx, pid, mr.IID, true)
			if err != nil {
				t.Fatal(err)
			}
			if got.RebaseInProgress || got.MergeError != tt.wantMergeError {
				t.Errorf("after rebase: RebaseInProgress=%v MergeError=%q; want false %q", got.RebaseInProgress, got.MergeError, tt.wantMergeError)
			}
			if moved := got.SHA != commit.SHA; moved == tt.conflict {
				t.Errorf("after rebase: head moved = %v; want %v", moved, !tt.conflict)
			}
			if n := f.srv.CallCount("GET", "/api/v4/projects/*/merge_requests/*"); n != 1 {
				t.Errorf("MR reads = %d; want 1", n)
			}
			for _, call := range f.srv.Calls() {
				if call.Method == "GET" && strings.HasSuffix(call.Path, "/merge_requests/"+strconv.FormatInt(mr.IID, 10)) && !strings.Contains(call.Query, "include_rebase_in_progress=true") {
					t.Errorf("MR poll without include_rebase_in_progress: %s?%s", call.Path, call.Query)
				}
			}
			closed, err := c.CloseMergeRequest(ctx, pid, mr.IID)
			if err != nil || closed.State != platform.MRStateClosed {
				t.Fatalf("CloseMergeRequest = %+v, %v; want closed", closed, err)
			}
		})
	}
}

// TestConformanceFaults checks translation of the fake's injected faults:
// the status, message and Retry-After survive; reads retry 5xx a bounded
// number of times; writes are not retried on 5xx.
func TestConformanceFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		fault          gitlabfake.Fault
		call           func(*testing.T, suite) error
		pattern        string
		wantStatus     int
		wantRetryAfter time.Duration
		wantCalls      int
	}{
		{
			name:  "merge 405",
			fault: gitlabfake.Fault{Method: "PUT", PathPattern: "/api/v4/projects/*/merge_requests/*/merge", Status: 405},
			call: func(t *testing.T, f suite) error {
				_, err := f.c.Merge(t.Context(), f.project.ID, 1, platform.MergeParams{SHA: "abc"})
				return err
			},
			pattern: "/api/v4/projects/*/merge_requests/*/merge", wantStatus: 405, wantCalls: 1,
		},
		{
			name:  "read 500 retried twice",
			fault: gitlabfake.Fault{Method: "GET", PathPattern: "/api/v4/projects/*/repository/branches/*", Status: 500},
			call: func(t *testing.T, f suite) error {
				_, err := f.c.Branch(t.Context(), f.project.ID, "main")
				return err
			},
			pattern: "/api/v4/projects/*/repository/branches/*", wantStatus: 500, wantCalls: 1 + gitlab.DefaultRetryMax,
		},
		{
			name:  "read 503 once then ok",
			fault: gitlabfake.Fault{Method: "GET", PathPattern: "/api/v4/projects/*/repository/branches/*", Status: 503, Times: 1},
			call: func(t *testing.T, f suite) error {
				_, err := f.c.Branch(t.Context(), f.project.ID, "main")
				return err
			},
			pattern: "/api/v4/projects/*/repository/branches/*", wantStatus: 0, wantCalls: 2,
		},
		{
			name:  "note 429 with long Retry-After",
			fault: gitlabfake.Fault{Method: "POST", PathPattern: "/api/v4/projects/*/merge_requests/*/notes", Status: 429, RetryAfter: "30"},
			call: func(t *testing.T, f suite) error {
				_, err := f.c.CreateNote(t.Context(), f.project.ID, 1, "hi")
				return err
			},
			pattern: "/api/v4/projects/*/merge_requests/*/notes", wantStatus: 429, wantRetryAfter: 30 * time.Second, wantCalls: 1,
		},
		{
			name:  "commit 502 not retried",
			fault: gitlabfake.Fault{Method: "POST", PathPattern: "/api/v4/projects/*/repository/commits", Status: 502},
			call: func(t *testing.T, f suite) error {
				_, err := f.c.CreateCommit(t.Context(), f.project.ID, platform.CommitParams{Branch: "main", Message: "m",
					Actions: []platform.FileAction{{Action: "create", FilePath: "x", Content: "x"}}})
				return err
			},
			pattern: "/api/v4/projects/*/repository/commits", wantStatus: 502, wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.srv.InjectFault(tt.fault)
			err := tt.call(t, f)
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatalf("err = %v; want success after the retry", err)
				}
			} else {
				requireStatus(t, err, tt.wantStatus, "")
				var pe *platform.Error
				errors.As(err, &pe)
				if pe.RetryAfter != tt.wantRetryAfter {
					t.Errorf("RetryAfter = %v; want %v", pe.RetryAfter, tt.wantRetryAfter)
				}
			}
			if n := f.srv.CallCount(tt.fault.Method, tt.pattern); n != tt.wantCalls {
				t.Errorf("calls = %d; want %d", n, tt.wantCalls)
			}
		})
	}
}

// TestConformanceBranchWithCommit: one POST .../repository/commits with
// start_branch creates the branch and its commit; on a branch that exists
// GitLab answers 400 "A branch called '<b>' already exists. Switch to that
// branch in order to make changes" (Commits::CreateService), which is
// platform.ErrAlreadyExists, while a refused file action is not.
func TestConformanceBranchWithCommit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	pid := f.project.ID
	main, err := f.c.Branch(ctx, pid, "main")
	if err != nil {
		t.Fatal(err)
	}
	const branch = "changebot/op_01WITHCOMMIT"
	params := platform.CommitParams{Branch: branch, Message: "Apply op_01WITHCOMMIT",
		Actions: []platform.FileAction{{Action: "create", FilePath: "services/new.yaml", Content: "replicas: 3\n"}}}
	commit, err := f.c.CreateBranchWithCommit(ctx, pid, "main", params)
	if err != nil || len(commit.ParentIDs) != 1 || commit.ParentIDs[0] != main.CommitSHA {
		t.Fatalf("CreateBranchWithCommit = %+v, %v; want one commit on main's head %s", commit, err, main.CommitSHA)
	}
	if b, err := f.c.Branch(ctx, pid, branch); err != nil || b.CommitSHA != commit.SHA {
		t.Fatalf("the new branch = %+v, %v; want its tip at %s", b, err, commit.SHA)
	}
	if n := f.srv.CallCount("POST", "/api/v4/projects/*/repository/branches"); n != 0 {
		t.Errorf("branch creates: %d, want 0 (the commit created the branch)", n)
	}
	_, err = f.c.CreateBranchWithCommit(ctx, pid, "main", params)
	requireStatus(t, err, 400, "A branch called '"+branch+"' already exists")
	if !errors.Is(err, platform.ErrAlreadyExists) {
		t.Errorf("on an existing branch err = %v; want ErrAlreadyExists", err)
	}
	params.Branch = "changebot/op_01OTHER"
	params.Actions[0].FilePath = "README.md" // exists on main: create is refused
	_, err = f.c.CreateBranchWithCommit(ctx, pid, "main", params)
	if errors.Is(err, platform.ErrAlreadyExists) || !platform.IsRefused(err) {
		t.Errorf("create of an existing file err = %v; want a refusal that is not ErrAlreadyExists", err)
	}
}
