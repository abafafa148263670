// Package platformtest is the adapter conformance suite: one set of tests,
// in the flows' terms, that every platform adapter must pass against its
// in-memory fake (platform/gitlab with gitlabfake, platform/github with
// githubfake). Each adapter's tests build a Harness and call Run.
//
// The suite decides on the platform.Error kinds (errors.Is), never on
// status numbers or messages: those differ by platform and are checked in
// each adapter's own tests. It must not import an adapter or a fake; the
// Harness hands it both.
package platformtest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"changebot/platform"
)

// Adapter is the method set the flows call (flows.Platform) plus the reads
// the suite checks with, which both adapters have.
type Adapter interface {
	CurrentUser(ctx context.Context) (platform.User, error)
	ReviewerCount() int
	Reviewer(ctx context.Context, i int) (platform.User, error)
	Project(ctx context.Context, project string) (platform.Project, error)
	Branch(ctx context.Context, projectID int64, name string) (platform.Branch, error)
	CreateBranch(ctx context.Context, projectID int64, name, ref string) (platform.Branch, error)
	DeleteBranch(ctx context.Context, projectID int64, name string) error
	CreateCommit(ctx context.Context, projectID int64, p platform.CommitParams) (platform.Commit, error)
	Commit(ctx context.Context, projectID int64, sha string) (platform.Commit, error)
	BranchCommits(ctx context.Context, projectID int64, base, branch string) ([]platform.Commit, error)
	TreeFiles(ctx context.Context, projectID int64, ref, dir string) (map[string]bool, error)
	FindOpenMergeRequest(ctx context.Context, projectID int64, sourceBranch string) (platform.MergeRequest, error)
	CreateMergeRequest(ctx context.Context, projectID int64, p platform.CreateMRParams) (platform.MergeRequest, error)
	MergeRequest(ctx context.Context, projectID, iid int64, includeRebase bool) (platform.MergeRequest, error)
	CloseMergeRequest(ctx context.Context, projectID, iid int64) (platform.MergeRequest, error)
	CreateMergeRequestPipeline(ctx context.Context, projectID, iid int64) (platform.Pipeline, error)
	MemberAccess(ctx context.Context, projectID, userID int64) (int, error)
	GroupMemberAccess(ctx context.Context, group string, userID int64) (int, error)
	Approvals(ctx context.Context, projectID, iid int64) ([]platform.User, error)
	Approve(ctx context.Context, reviewer int, projectID, iid int64, sha string) error
	Unapprove(ctx context.Context, reviewer int, projectID, iid int64) error
	Merge(ctx context.Context, projectID, iid int64, p platform.MergeParams) (platform.MergeRequest, error)
	Rebase(ctx context.Context, projectID, iid int64) error
	Pipelines(ctx context.Context, projectID int64, ref, sha string) ([]platform.Pipeline, error)
	IsAncestor(ctx context.Context, projectID int64, ancestor, descendant string) (bool, error)
	CreateNote(ctx context.Context, projectID, iid int64, body string) (platform.Note, error)
	UpdateNote(ctx context.Context, projectID, iid, noteID int64, body string) (platform.Note, error)
	Note(ctx context.Context, projectID, iid, noteID int64) (platform.Note, error)
	FindNote(ctx context.Context, projectID, iid int64, marker string) (platform.Note, error)
	FileAt(ctx context.Context, projectID int64, path, ref string) ([]byte, error)
	ChangedPaths(ctx context.Context, projectID, iid int64) ([]string, error)
}

// Env is one fresh adapter+fake pair with one project, built per test by
// Harness.Setup.
type Env struct {
	Adapter Adapter
	// ProjectRef is the project's path ("group/config", "owner/config").
	ProjectRef string
	ProjectID  int64
	// DefaultBranch is the target of merge requests, "main".
	DefaultBranch string
	// Robot is the author; Reviewers are the reviewer accounts in the
	// adapter's reviewer order; Outsider has no access to the project.
	Robot     platform.User
	Reviewers []platform.User
	Outsider  platform.User
	// ReviewerAccess is the access level the reviewers have
	// (platform.AccessDeveloper on both platforms: GitHub's write).
	ReviewerAccess int
	// Group is a group (organization) the robot belongs to, and
	// GroupAccess the robot's access level in it.
	Group       string
	GroupAccess int
	// Secrets are the tokens no error may contain.
	Secrets []string

	// WaitIdle lets the fake finish its pipelines, rebases and webhooks.
	WaitIdle func(t *testing.T)
	// PushToTarget pushes a person's commit to branch.
	PushToTarget func(t *testing.T, branch string)
	// ConflictOnRebase makes merge request iid's next rebase (GitHub:
	// update-branch) conflict.
	ConflictOnRebase func(t *testing.T, iid int64)
	// BlockMerge makes merging merge request iid refused as not
	// mergeable by a rule the fake does not otherwise model.
	BlockMerge func(t *testing.T, iid int64)
	// FailFirstPipeline makes the next merge request pipeline fail and
	// every later one succeed.
	FailFirstPipeline func(t *testing.T)
	// RateLimitNotes makes the next note creation rate limited with a
	// wait of 30 s named by the platform.
	RateLimitNotes func(t *testing.T)
}

// Harness builds Envs for one adapter.
type Harness struct {
	// Name names the platform in subtest names, "gitlab" or "github".
	Name string
	// Setup returns a fresh Env; it registers its own cleanup with t.
	Setup func(t *testing.T) *Env
}

// Run runs every conformance test against h.
func Run(t *testing.T, h Harness) {
	t.Run("HappyPath", func(t *testing.T) { t.Parallel(); happyPath(t, h.Setup(t)) })
	t.Run("RebaseAndClose", func(t *testing.T) { t.Parallel(); rebaseAndClose(t, h) })
	t.Run("RetryFailedPipeline", func(t *testing.T) { t.Parallel(); retryFailedPipeline(t, h.Setup(t)) })
	t.Run("NotMergeable", func(t *testing.T) { t.Parallel(); notMergeable(t, h.Setup(t)) })
	t.Run("RateLimited", func(t *testing.T) { t.Parallel(); rateLimited(t, h.Setup(t)) })
	t.Run("Files", func(t *testing.T) { t.Parallel(); files(t, h.Setup(t)) })
}

const statusMarker = "<!-- changebot:status op_01CONFORMANCE -->"

// requireKind fails unless err matches kind and carries no secret.
func (e *Env) requireKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: err = %v; want %v", what, err, kind)
	}
	e.noSecret(t, err)
}

func (e *Env) noSecret(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range e.Secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error leaks a secret: %v", err)
		}
	}
}

// change creates a branch with one commit and opens a merge request.
func (e *Env) change(t *testing.T, branch, file string) (platform.Commit, platform.MergeRequest) {
	t.Helper()
	ctx, a, pid := t.Context(), e.Adapter, e.ProjectID
	if _, err := a.CreateBranch(ctx, pid, branch, e.DefaultBranch); err != nil {
		t.Fatalf("CreateBranch: %v", err)
	}
	c, err := a.CreateCommit(ctx, pid, platform.CommitParams{Branch: branch, Message: "Apply " + branch,
		Actions: []platform.FileAction{{Action: "create", FilePath: file, Content: "replicas: 3\n"}}})
	if err != nil {
		t.Fatalf("CreateCommit: %v", err)
	}
	mr, err := a.CreateMergeRequest(ctx, pid, platform.CreateMRParams{SourceBranch: branch, TargetBranch: e.DefaultBranch, Title: "Apply " + branch})
	if err != nil {
		t.Fatalf("CreateMergeRequest: %v", err)
	}
	return c, mr
}

// happyPath walks one change: robots, project, access, branch, commit, the
// merge request, its pipeline, the status comment, approvals, merge, and
// the deploy pipeline of the merge commit.
func happyPath(t *testing.T, e *Env) {
	ctx, a, pid := t.Context(), e.Adapter, e.ProjectID

	robot, err := a.CurrentUser(ctx)
	if err != nil || robot != e.Robot {
		t.Fatalf("CurrentUser = %+v, %v; want %+v", robot, err, e.Robot)
	}
	if a.ReviewerCount() != len(e.Reviewers) {
		t.Fatalf("ReviewerCount = %d; want %d", a.ReviewerCount(), len(e.Reviewers))
	}
	for i, want := range e.Reviewers {
		if u, err := a.Reviewer(ctx, i); err != nil || u != want {
			t.Fatalf("Reviewer(%d) = %+v, %v; want %+v", i, u, err, want)
		}
	}

	for _, ref := range []string{e.ProjectRef, itoa(pid)} {
		p, err := a.Project(ctx, ref)
		if err != nil || p.ID != pid || p.PathWithNamespace != e.ProjectRef || p.DefaultBranch != e.DefaultBranch {
			t.Fatalf("Project(%q) = %+v, %v", ref, p, err)
		}
	}
	_, err = a.Project(ctx, e.ProjectRef+"-missing")
	e.requireKind(t, "Project(missing)", err, platform.ErrNotFound)
	if lvl, err := a.MemberAccess(ctx, pid, e.Reviewers[0].ID); err != nil || lvl != e.ReviewerAccess {
		t.Errorf("MemberAccess(reviewer 0) = %d, %v; want %d", lvl, err, e.ReviewerAccess)
	}
	if lvl, err := a.MemberAccess(ctx, pid, e.Outsider.ID); err != nil || lvl != 0 {
		t.Errorf("MemberAccess(outsider) = %d, %v; want 0, nil", lvl, err)
	}
	if e.Group != "" {
		if lvl, err := a.GroupMemberAccess(ctx, e.Group, e.Robot.ID); err != nil || lvl != e.GroupAccess {
			t.Errorf("GroupMemberAccess(robot) = %d, %v; want %d", lvl, err, e.GroupAccess)
		}
		if lvl, err := a.GroupMemberAccess(ctx, e.Group, e.Outsider.ID); err != nil || lvl != 0 {
			t.Errorf("GroupMemberAccess(outsider) = %d, %v; want 0, nil", lvl, err)
		}
	}

	main, err := a.Branch(ctx, pid, e.DefaultBranch)
	if err != nil || main.CommitSHA == "" {
		t.Fatalf("Branch(%s) = %+v, %v", e.DefaultBranch, main, err)
	}
	const branch = "changebot/op_01CONFORMANCE"
	_, err = a.Branch(ctx, pid, branch)
	e.requireKind(t, "Branch(new)", err, platform.ErrNotFound)
	b, err := a.CreateBranch(ctx, pid, branch, e.DefaultBranch)
	if err != nil || b.Name != branch || b.CommitSHA != main.CommitSHA {
		t.Fatalf("CreateBranch = %+v, %v; want %s at %s", b, err, branch, main.CommitSHA)
	}
	_, err = a.CreateBranch(ctx, pid, branch, e.DefaultBranch)
	e.requireKind(t, "CreateBranch(again)", err, platform.ErrAlreadyExists)

	commit, err := a.CreateCommit(ctx, pid, platform.CommitParams{
		Branch: branch, Message: "Apply op_01CONFORMANCE",
		Actions: []platform.FileAction{
			{Action: "create", FilePath: "services/api.yaml", Content: "replicas: 3\n"},
			{Action: "create", FilePath: "services/web.yaml", Content: "replicas: 2\n"},
		},
	})
	if err != nil || commit.SHA == "" || len(commit.ParentIDs) != 1 || commit.ParentIDs[0] != main.CommitSHA {
		t.Fatalf("CreateCommit = %+v, %v; want one parent %s", commit, err, main.CommitSHA)
	}
	if got, err := a.Commit(ctx, pid, commit.SHA); err != nil || got.SHA != commit.SHA || got.Title != "Apply op_01CONFORMANCE" {
		t.Errorf("Commit = %+v, %v", got, err)
	}
	if b, err := a.Branch(ctx, pid, branch); err != nil || b.CommitSHA != commit.SHA {
		t.Errorf("Branch after commit = %+v, %v; want tip %s", b, err, commit.SHA)
	}
	if files, err := a.TreeFiles(ctx, pid, branch, "services"); err != nil || !files["services/api.yaml"] || !files["services/web.yaml"] || len(files) != 2 {
		t.Errorf("TreeFiles(services) = %v, %v; want the two files, one commit", files, err)
	}
	upd, err := a.CreateCommit(ctx, pid, platform.CommitParams{Branch: branch, Message: "Update op_01CONFORMANCE",
		Actions: []platform.FileAction{
			{Action: "update", FilePath: "services/api.yaml", Content: "replicas: 4\n"},
			{Action: "delete", FilePath: "services/web.yaml"},
		}})
	if err != nil || len(upd.ParentIDs) != 1 || upd.ParentIDs[0] != commit.SHA {
		t.Fatalf("CreateCommit(update, delete) = %+v, %v", upd, err)
	}
	if files, err := a.TreeFiles(ctx, pid, branch, ""); err != nil || !files["services/api.yaml"] || files["services/web.yaml"] {
		t.Errorf("TreeFiles after delete = %v, %v", files, err)
	}
	commit = upd
	if cs, err := a.BranchCommits(ctx, pid, e.DefaultBranch, branch); err != nil || len(cs) != 2 || cs[1].SHA != commit.SHA {
		t.Errorf("BranchCommits = %+v, %v; want two, the newest last", cs, err)
	}
	if ok, err := a.IsAncestor(ctx, pid, main.CommitSHA, commit.SHA); err != nil || !ok {
		t.Errorf("IsAncestor(main, commit) = %v, %v; want true", ok, err)
	}
	if ok, err := a.IsAncestor(ctx, pid, commit.SHA, main.CommitSHA); err != nil || ok {
		t.Errorf("IsAncestor(commit, main) = %v, %v; want false", ok, err)
	}

	_, err = a.FindOpenMergeRequest(ctx, pid, branch)
	e.requireKind(t, "FindOpenMergeRequest before create", err, platform.ErrNotFound)
	params := platform.CreateMRParams{SourceBranch: branch, TargetBranch: e.DefaultBranch, Title: "Apply op_01CONFORMANCE", Description: "changebot", RemoveSourceBranch: true}
	mr, err := a.CreateMergeRequest(ctx, pid, params)
	if err != nil || mr.IID == 0 || mr.SHA != commit.SHA || mr.State != platform.MRStateOpened || mr.Author.ID != robot.ID {
		t.Fatalf("CreateMergeRequest = %+v, %v", mr, err)
	}
	_, err = a.CreateMergeRequest(ctx, pid, params)
	e.requireKind(t, "CreateMergeRequest(again)", err, platform.ErrAlreadyExists)
	if found, err := a.FindOpenMergeRequest(ctx, pid, branch); err != nil || found.IID != mr.IID {
		t.Fatalf("FindOpenMergeRequest = %+v, %v; want #%d", found, err, mr.IID)
	}

	e.WaitIdle(t)
	got, err := a.MergeRequest(ctx, pid, mr.IID, true)
	if err != nil {
		t.Fatalf("MergeRequest: %v", err)
	}
	hp := got.HeadPipeline
	if hp == nil || hp.SHA != commit.SHA || hp.Status != platform.PipelineSuccess || got.RebaseInProgress {
		t.Fatalf("MergeRequest head pipeline = %+v; want a finished success on %s", hp, commit.SHA)
	}
	created, err := a.CreateMergeRequestPipeline(ctx, pid, mr.IID)
	if err != nil || created.SHA != commit.SHA || created.ID < hp.ID {
		t.Fatalf("CreateMergeRequestPipeline = %+v, %v; want a pipeline of %s, id at least %d", created, err, commit.SHA, hp.ID)
	}
	e.WaitIdle(t)
	if got, err := a.MergeRequest(ctx, pid, mr.IID, false); err != nil || got.HeadPipeline == nil || got.HeadPipeline.ID < created.ID || got.HeadPipeline.Status != platform.PipelineSuccess {
		t.Fatalf("MergeRequest after CreateMergeRequestPipeline = %+v, %v; want a successful head pipeline with id >= %d", got.HeadPipeline, err, created.ID)
	}

	note, err := a.CreateNote(ctx, pid, mr.IID, "Change is waiting for approval.\n"+statusMarker)
	if err != nil || note.ID == 0 || note.Author.ID != robot.ID {
		t.Fatalf("CreateNote = %+v, %v", note, err)
	}
	if found, err := a.FindNote(ctx, pid, mr.IID, statusMarker); err != nil || found.ID != note.ID {
		t.Fatalf("FindNote = %+v, %v; want note %d", found, err, note.ID)
	}
	_, err = a.FindNote(ctx, pid, mr.IID, "<!-- changebot:status op_other -->")
	e.requireKind(t, "FindNote(other marker)", err, platform.ErrNotFound)
	updated, err := a.UpdateNote(ctx, pid, mr.IID, note.ID, "Change is merging.\n"+statusMarker)
	if err != nil || updated.ID != note.ID || !strings.HasPrefix(updated.Body, "Change is merging.") {
		t.Fatalf("UpdateNote = %+v, %v", updated, err)
	}
	if read, err := a.Note(ctx, pid, mr.IID, note.ID); err != nil || read.Body != updated.Body {
		t.Errorf("Note = %+v, %v; want the updated body", read, err)
	}
	_, err = a.Note(ctx, pid, mr.IID, note.ID+1000)
	e.requireKind(t, "Note(missing)", err, platform.ErrNotFound)

	if users, err := a.Approvals(ctx, pid, mr.IID); err != nil || len(users) != 0 {
		t.Fatalf("Approvals before = %+v, %v; want none", users, err)
	}
	err = a.Approve(ctx, 0, pid, mr.IID, main.CommitSHA)
	e.requireKind(t, "Approve(old sha)", err, platform.ErrHeadMoved)
	if platform.IsTransient(err) {
		t.Errorf("Approve(old sha) error counted as transient")
	}
	for i := range e.Reviewers {
		if err := a.Approve(ctx, i, pid, mr.IID, commit.SHA); err != nil {
			t.Fatalf("Approve as reviewer %d: %v", i, err)
		}
	}
	users, err := a.Approvals(ctx, pid, mr.IID)
	if err != nil || !slices.Equal(users, e.Reviewers) {
		t.Fatalf("Approvals = %+v, %v; want %+v", users, err, e.Reviewers)
	}
	last := len(e.Reviewers) - 1
	if err := a.Unapprove(ctx, last, pid, mr.IID); err != nil {
		t.Fatalf("Unapprove(%d): %v", last, err)
	}
	if users, err := a.Approvals(ctx, pid, mr.IID); err != nil || !slices.Equal(users, e.Reviewers[:last]) {
		t.Fatalf("Approvals after Unapprove = %+v, %v; want %+v", users, err, e.Reviewers[:last])
	}
	if err := a.Approve(ctx, last, pid, mr.IID, commit.SHA); err != nil {
		t.Fatalf("Approve again as reviewer %d: %v", last, err)
	}

	_, err = a.Merge(ctx, pid, mr.IID, platform.MergeParams{SHA: main.CommitSHA})
	e.requireKind(t, "Merge(old sha)", err, platform.ErrHeadMoved)
	merged, err := a.Merge(ctx, pid, mr.IID, platform.MergeParams{SHA: commit.SHA})
	if err != nil || merged.State != platform.MRStateMerged {
		t.Fatalf("Merge = %+v, %v; want merged", merged, err)
	}
	target := merged.MergeCommitSHA
	if target == "" {
		target = merged.SHA
	}
	if ok, err := a.IsAncestor(ctx, pid, commit.SHA, e.DefaultBranch); err != nil || !ok {
		t.Errorf("IsAncestor(commit, %s) after merge = %v, %v; want true", e.DefaultBranch, ok, err)
	}
	_, err = a.FindOpenMergeRequest(ctx, pid, branch)
	e.requireKind(t, "FindOpenMergeRequest after merge", err, platform.ErrNotFound)

	e.WaitIdle(t)
	deploys, err := a.Pipelines(ctx, pid, e.DefaultBranch, target)
	if err != nil || len(deploys) == 0 || deploys[0].SHA != target || deploys[0].Ref != e.DefaultBranch || deploys[0].Status != platform.PipelineSuccess {
		t.Fatalf("Pipelines(%s, %s) = %+v, %v; want the successful deploy pipeline", e.DefaultBranch, target, deploys, err)
	}
	if recent, err := a.Pipelines(ctx, pid, e.DefaultBranch, ""); err != nil || len(recent) == 0 || recent[0].SHA != target {
		t.Errorf("Pipelines(%s, no sha) = %+v, %v; want the merge commit's first", e.DefaultBranch, recent, err)
	}
	if err := a.DeleteBranch(ctx, pid, branch); err != nil && !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("DeleteBranch: %v", err)
	}
	_, err = a.Branch(ctx, pid, branch)
	e.requireKind(t, "Branch(deleted)", err, platform.ErrNotFound)
}

// rebaseAndClose: a push to the target, then a rebase (GitHub:
// update-branch) polled until done: the head moves, or with a conflict the
// rebase is refused or reported as a conflict; then the merge request is
// closed.
func rebaseAndClose(t *testing.T, h Harness) {
	for _, conflict := range []bool{false, true} {
		name := "rebase succeeds"
		if conflict {
			name = "rebase conflicts"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := h.Setup(t)
			ctx, a, pid := t.Context(), e.Adapter, e.ProjectID
			commit, mr := e.change(t, "feature", "a.txt")
			e.WaitIdle(t)
			if conflict {
				e.ConflictOnRebase(t, mr.IID)
			}
			e.PushToTarget(t, e.DefaultBranch)
			err := a.Rebase(ctx, pid, mr.IID)
			if err != nil && (!conflict || !platform.IsRefused(err)) {
				t.Fatalf("Rebase: %v", err)
			}
			e.WaitIdle(t)
			got, err := a.MergeRequest(ctx, pid, mr.IID, true)
			if err != nil {
				t.Fatal(err)
			}
			if got.RebaseInProgress {
				t.Errorf("after the rebase: RebaseInProgress still true")
			}
			moved := got.SHA != commit.SHA
			if moved == conflict {
				t.Errorf("after the rebase: head moved = %v; want %v", moved, !conflict)
			}
			if conflict && !got.HasConflicts && got.DetailedMergeStatus != "conflict" && !strings.Contains(got.MergeError, "Rebase failed") {
				t.Errorf("after a conflicting rebase: %+v; want it reported as a conflict", got)
			}
			closed, err := a.CloseMergeRequest(ctx, pid, mr.IID)
			if err != nil || closed.State != platform.MRStateClosed {
				t.Fatalf("CloseMergeRequest = %+v, %v; want closed", closed, err)
			}
		})
	}
}

// retryFailedPipeline: a failed head pipeline, run again (GitLab: a new
// merge request pipeline; GitHub: the failed jobs re-run), gives a pipeline
// with a larger id that passes; the failed one is not taken for it.
func retryFailedPipeline(t *testing.T, e *Env) {
	ctx, a, pid := t.Context(), e.Adapter, e.ProjectID
	e.FailFirstPipeline(t)
	commit, mr := e.change(t, "retry", "r.txt")
	e.WaitIdle(t)
	got, err := a.MergeRequest(ctx, pid, mr.IID, false)
	if err != nil || got.HeadPipeline == nil || got.HeadPipeline.Status != platform.PipelineFailed || got.HeadPipeline.SHA != commit.SHA {
		t.Fatalf("MergeRequest = %+v, %v; want a failed head pipeline on %s", got.HeadPipeline, err, commit.SHA)
	}
	failed := *got.HeadPipeline
	created, err := a.CreateMergeRequestPipeline(ctx, pid, mr.IID)
	if err != nil || created.ID <= failed.ID || created.Finished() || created.SHA != commit.SHA {
		t.Fatalf("CreateMergeRequestPipeline = %+v, %v; want an unfinished pipeline of %s above id %d", created, err, commit.SHA, failed.ID)
	}
	e.WaitIdle(t)
	got, err = a.MergeRequest(ctx, pid, mr.IID, false)
	if err != nil || got.HeadPipeline == nil || got.HeadPipeline.ID < created.ID || got.HeadPipeline.Status != platform.PipelineSuccess {
		t.Fatalf("MergeRequest after the retry = %+v, %v; want success with id >= %d", got.HeadPipeline, err, created.ID)
	}
}

// notMergeable: a merge the platform refuses is ErrNotMergeable, not
// transient, and changes nothing.
func notMergeable(t *testing.T, e *Env) {
	ctx, a, pid := t.Context(), e.Adapter, e.ProjectID
	commit, mr := e.change(t, "blocked", "b.txt")
	e.WaitIdle(t)
	e.BlockMerge(t, mr.IID)
	_, err := a.Merge(ctx, pid, mr.IID, platform.MergeParams{SHA: commit.SHA})
	e.requireKind(t, "Merge(blocked)", err, platform.ErrNotMergeable)
	if !platform.IsRefused(err) {
		t.Errorf("Merge(blocked) error %v not a refusal", err)
	}
	if got, err := a.MergeRequest(ctx, pid, mr.IID, false); err != nil || got.State != platform.MRStateOpened {
		t.Errorf("after the refused merge: %+v, %v; want still open", got, err)
	}
}

// rateLimited: a rate-limited write is ErrRateLimited, transient, with the
// wait the platform named.
func rateLimited(t *testing.T, e *Env) {
	ctx, a, pid := t.Context(), e.Adapter, e.ProjectID
	_, mr := e.change(t, "limited", "c.txt")
	e.RateLimitNotes(t)
	_, err := a.CreateNote(ctx, pid, mr.IID, "hello")
	e.requireKind(t, "CreateNote(rate limited)", err, platform.ErrRateLimited)
	if !platform.IsTransient(err) || platform.RetryAfterOf(err) != 30*time.Second {
		t.Errorf("rate limit: transient %v, RetryAfter %v; want true, 30s", platform.IsTransient(err), platform.RetryAfterOf(err))
	}
	if n, err := a.CreateNote(ctx, pid, mr.IID, "hello again"); err != nil || n.ID == 0 {
		t.Errorf("CreateNote after the limit = %+v, %v", n, err)
	}
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return string(b[i:])
}
