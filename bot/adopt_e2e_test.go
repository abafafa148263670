package bot

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
	"changebot/templates"
)

// adoptPolicy is the demo project's .changebot.yml: services/<name>/prod.yaml
// is binding <name> / prod/eu-west-1 (docs/changebot-yml.md).
const adoptPolicy = `version: 1
paths:
  - match: "services/*/prod.yaml"
    subject: "{1}"
    target: "prod/eu-west-1"
`

// adoptEnv is a GitLab test environment where adoption is on for the demo
// project, whose default branch holds adoptPolicy, with developer dana
// (Developer) and a running bot.
func adoptEnv(t *testing.T) (*demo.Env, *App) {
	t.Helper()
	env := newTestEnv(t, true, 200*time.Millisecond)
	env.Config.AdoptProjects = []string{demo.Project}
	env.Config.AdoptLabel = "changebot"
	env.GitLab.AddMember(env.Project.ID, "dana", gitlabfake.AccessDeveloper)
	if env.GitLab.Push(env.Project.ID, env.Project.DefaultBranch, "dana", "Add the path rules", map[string]string{".changebot.yml": adoptPolicy}) == "" {
		t.Fatal("pushing .changebot.yml failed")
	}
	app, _ := startBotWithOpts(t, env, demo.Poll, &AppOpts{})
	return env, app
}

// openDeveloperMR makes dana open a merge request changing one file, with
// labels.
func openDeveloperMR(t *testing.T, env *demo.Env, branch string, labels ...string) int64 {
	t.Helper()
	return openDeveloperMRWith(t, env, branch, "services/payments-api/prod.yaml", labels...)
}

// openDeveloperMRWith is openDeveloperMR changing path.
func openDeveloperMRWith(t *testing.T, env *demo.Env, branch, path string, labels ...string) int64 {
	t.Helper()
	iid := env.GitLab.OpenMRAsUser(gitlabfake.DeveloperMR{ProjectID: env.Project.ID, Username: "dana",
		SourceBranch: branch, TargetBranch: env.Project.DefaultBranch, Title: "Raise payments-api replicas to 7",
		Files: map[string]string{path: "replicas: 7\n"}, Labels: labels})
	if iid == 0 {
		t.Fatal("the fake GitLab opened no merge request")
	}
	return iid
}

// waitAdopted waits for the change of MR !iid, 30 s at most.
func waitAdopted(t *testing.T, app *App, projectID, iid int64) store.Operation {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		op, err := app.Store().FindOperationByMR(context.Background(), app.Store().DB(), store.PlatformGitLab, projectID, iid)
		if err == nil {
			return op
		}
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("!%d was never adopted", iid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// statusNotes are the bodies of the robot's status comments on a merge request.
func statusNotes(snap gitlabfake.MRSnapshot) []string {
	var out []string
	for _, n := range snap.Notes {
		if _, ok := templates.ParseMarker(n.Body); ok {
			out = append(out, n.Body)
		}
	}
	return out
}

// TestAdoptLabelledMergeRequestReachesValidated is issue 25's acceptance on
// GitLab: a merge request a developer opened with the label becomes a change
// that goes to VALIDATED as an API change does (one merge, both reviewer
// robots' approvals, one status comment), and the robot pushes nothing to
// the developer's branch.
func TestAdoptLabelledMergeRequestReachesValidated(t *testing.T) {
	t.Parallel()
	env, app := adoptEnv(t)
	iid := openDeveloperMR(t, env, "dana/replicas", "changebot")
	before, _ := env.GitLab.MergeRequest(env.Project.ID, iid)
	op := waitAdopted(t, app, env.Project.ID, iid)
	if !op.Adopted || op.RequestedBy != "dana" || op.SourceBranch != "dana/replicas" || op.HeadSHA != before.SHA || len(op.Files) != 0 {
		t.Fatalf("adopted change %+v, want adopted, requested by dana, branch dana/replicas at %s, no files", op, before.SHA)
	}
	if op.SubjectID != "payments-api" || op.TargetKey != "prod/eu-west-1" {
		t.Fatalf("binding %s / %s, want payments-api / prod/eu-west-1 from .changebot.yml", op.SubjectID, op.TargetKey)
	}
	view, err := demo.FollowChange(context.Background(), env, op.ID, 60*time.Second, func(api.ChangeView) {})
	if err != nil {
		t.Fatal(err)
	}
	if view.MergeRequest == nil || view.MergeRequest.IID != iid {
		t.Fatalf("the change shows merge request %+v, want !%d", view.MergeRequest, iid)
	}
	if !view.Adopted {
		t.Errorf("GET /api/v1/changes/%s does not say the change is adopted", op.ID)
	}
	// MR first: the developer's pipeline on its head, then the approval
	// system's request carrying the merge request, then the merge.
	events, err := app.Store().ListEvents(context.Background(), app.Store().DB(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, ev := range events {
		if ev.Type == store.EventSubmitted || ev.Type == store.EventTransition {
			path = append(path, flowsStepName(ev.ToStep))
		}
	}
	wantPath := "CREATE_STARTED,CREATE_MR_OPENED,CREATE_SUCCEEDED,APPROVAL_SENDING,APPROVAL_SENT,HANDLE_STARTED,HANDLE_APPROVED,HANDLE_MERGED,CALLED_BACK"
	if strings.Join(path, ",") != wantPath {
		t.Fatalf("state path %v, want %s", path, wantPath)
	}
	snap, _ := env.GitLab.MergeRequest(env.Project.ID, iid)
	if snap.State != "merged" || len(snap.Approvals) != 2 {
		t.Fatalf("MR state %s approvals %v, want merged with both reviewer robots' approvals", snap.State, snap.Approvals)
	}
	if n := env.GitLab.CallCount("PUT", "/api/v4/projects/*/merge_requests/*/merge"); n != 1 {
		t.Errorf("merge calls = %d, want 1", n)
	}
	if n := env.GitLab.CallCount("POST", "/api/v4/projects/*/merge_requests"); n != 0 {
		t.Errorf("%d merge requests opened by the robot, want none", n)
	}
	if n := env.GitLab.CallCount("POST", "/api/v4/projects/*/repository/commits"); n != 0 {
		t.Errorf("%d commits pushed by the robot, want none", n)
	}
	if snap.SHA != before.SHA {
		t.Errorf("the developer's head moved from %s to %s", before.SHA, snap.SHA)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		snap, _ = env.GitLab.MergeRequest(env.Project.ID, iid)
		notes := statusNotes(snap)
		if len(notes) > 1 {
			t.Fatalf("%d status notes, want 1", len(notes))
		}
		if len(notes) == 1 && strings.Contains(notes[0], "<sub>VALIDATED · step") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status note never showed VALIDATED: %q", notes)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAdoptUnlabelledMergeRequestLeftAlone: a developer's merge request
// without the label gets no change and no comment.
func TestAdoptUnlabelledMergeRequestLeftAlone(t *testing.T) {
	t.Parallel()
	env, app := adoptEnv(t)
	iid := openDeveloperMR(t, env, "dana/unlabelled", "documentation")
	flushHooks(t, env)
	// The open hook is applied by a job: give it time to do anything.
	time.Sleep(time.Second)
	_, err := app.Store().FindOperationByMR(context.Background(), app.Store().DB(), store.PlatformGitLab, env.Project.ID, iid)
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FindOperationByMR: %v, want no change", err)
	}
	snap, _ := env.GitLab.MergeRequest(env.Project.ID, iid)
	for _, n := range snap.Notes {
		if !n.System {
			t.Errorf("comment %q on an unlabelled merge request", n.Body)
		}
	}
}

// TestAdoptLabelRemovedLetsGo: taking the label off ends the adopted change
// in CLOSED, with the merge request still open and its branch in place.
func TestAdoptLabelRemovedLetsGo(t *testing.T) {
	t.Parallel()
	env, app := adoptEnv(t)
	// A pipeline that waits, so the change is in progress when let go.
	env.GitLab.SetPipelineScript(env.Project.ID, gitlabfake.PipelineScript{MR: []string{"running"}})
	iid := openDeveloperMR(t, env, "dana/letgo", "changebot")
	op := waitAdopted(t, app, env.Project.ID, iid)
	env.GitLab.SetLabelsAsUser(env.Project.ID, iid, "dana", nil, []string{"changebot"})
	deadline := time.Now().Add(30 * time.Second)
	for {
		cur, err := app.Store().GetOperation(context.Background(), app.Store().DB(), op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Status == store.StatusClosed {
			if !strings.Contains(cur.Detail, "let go") {
				t.Errorf("detail %q, want it to say the robot let go", cur.Detail)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the change is %s (%s), want CLOSED after the label was removed", cur.Status, cur.Detail)
		}
		time.Sleep(50 * time.Millisecond)
	}
	snap, _ := env.GitLab.MergeRequest(env.Project.ID, iid)
	if snap.State != "opened" {
		t.Errorf("merge request %s, want it left open", snap.State)
	}
	if !env.GitLab.HasBranch(env.Project.ID, "dana/letgo") {
		t.Error("the developer's branch was deleted")
	}
	// The one status comment says the robot let go.
	deadline = time.Now().Add(10 * time.Second)
	for {
		notes := statusNotes(snap)
		if len(notes) == 1 && strings.Contains(notes[0], "let go (the merge request stays open") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status comments %q, want one saying the robot let go", notes)
		}
		time.Sleep(100 * time.Millisecond)
		snap, _ = env.GitLab.MergeRequest(env.Project.ID, iid)
	}
}

// robotName is the demo robot's username (GET /user).
func robotName(t *testing.T, app *App) string {
	t.Helper()
	u, err := app.gitlab.CurrentUser(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}

// waitComments waits until MR !iid holds want comments that are not system
// notes nor dana's, 30 s at most, and returns them.
func waitComments(t *testing.T, env *demo.Env, iid int64, want int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, _ := env.GitLab.MergeRequest(env.Project.ID, iid)
		var got []string
		for _, n := range snap.Notes {
			if !n.System && n.Author != "dana" && n.Author != "eve" {
				got = append(got, n.Body)
			}
		}
		if len(got) >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAdoptMergeCommand: "@<robot> merge" from a non-member is refused with
// exactly one reply naming why, and nothing else happens; from a developer
// it adopts the merge request.
func TestAdoptMergeCommand(t *testing.T) {
	t.Parallel()
	env, app := adoptEnv(t)
	robot := robotName(t, app)
	iid := openDeveloperMR(t, env, "dana/command")
	env.GitLab.AddNoteAsUser(env.Project.ID, iid, "eve", "@"+robot+" merge")
	flushHooks(t, env)
	waitComments(t, env, iid, 1)
	time.Sleep(500 * time.Millisecond) // a second reply would come now
	replies := waitComments(t, env, iid, 1)
	if len(replies) != 1 || !strings.Contains(replies[0], "access level 30 (Developer)") {
		t.Fatalf("replies to a non-member's merge: %q, want one naming the access needed", replies)
	}
	if _, err := app.Store().FindOperationByMR(context.Background(), app.Store().DB(), store.PlatformGitLab, env.Project.ID, iid); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FindOperationByMR after a refused merge: %v, want no change", err)
	}
	env.GitLab.AddNoteAsUser(env.Project.ID, iid, "dana", "@"+robot+" merge")
	op := waitAdopted(t, app, env.Project.ID, iid)
	if !op.Adopted || op.RequestedBy != "dana" {
		t.Fatalf("change %+v, want adopted for dana", op)
	}
	// The label added afterwards adopts nothing more.
	env.GitLab.SetLabelsAsUser(env.Project.ID, iid, "dana", []string{"changebot"}, nil)
	if _, err := demo.FollowChange(context.Background(), env, op.ID, 60*time.Second, func(api.ChangeView) {}); err != nil {
		t.Fatal(err)
	}
	events, err := app.Store().ListEvents(context.Background(), app.Store().DB(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	submitted := 0
	for _, ev := range events {
		if ev.Type == store.EventSubmitted {
			submitted++
		}
	}
	if submitted != 1 {
		t.Errorf("%d submitted events, want 1", submitted)
	}
}

// TestAdoptUnboundPathsRefusedOnce: a labelled merge request whose paths no
// rule of .changebot.yml matches is refused with one reply naming the path,
// and no change is created.
func TestAdoptUnboundPathsRefusedOnce(t *testing.T) {
	t.Parallel()
	env, app := adoptEnv(t)
	iid := openDeveloperMRWith(t, env, "dana/stray", "docs/notes.md", "changebot")
	flushHooks(t, env)
	waitComments(t, env, iid, 1)
	time.Sleep(500 * time.Millisecond) // a second reply would come now
	replies := waitComments(t, env, iid, 1)
	if len(replies) != 1 || !strings.Contains(replies[0], "docs/notes.md") {
		t.Fatalf("replies %q, want one naming docs/notes.md", replies)
	}
	if _, err := app.Store().FindOperationByMR(context.Background(), app.Store().DB(), store.PlatformGitLab, env.Project.ID, iid); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FindOperationByMR: %v, want no change", err)
	}
}

// TestAdoptReviewRequestAnsweredOnce: the robot requested as a reviewer on a
// merge request not opted in answers once how to opt in, and never again
// for that merge request; another reviewer requested gets no answer.
func TestAdoptReviewRequestAnsweredOnce(t *testing.T) {
	t.Parallel()
	env, app := adoptEnv(t)
	robot := robotName(t, app)
	iid := openDeveloperMR(t, env, "dana/review")
	env.GitLab.RequestReviewAsUser(env.Project.ID, iid, "dana", "alice")
	env.GitLab.RequestReviewAsUser(env.Project.ID, iid, "dana", robot)
	replies := waitComments(t, env, iid, 1)
	if len(replies) != 1 || !strings.Contains(replies[0], "`changebot`") || !strings.Contains(replies[0], "@"+robot+" merge") {
		t.Fatalf("replies %q, want one saying how to opt in", replies)
	}
	// Taken off and requested again: still the one answer.
	env.GitLab.RemoveReviewAsUser(env.Project.ID, iid, "dana", robot)
	env.GitLab.RequestReviewAsUser(env.Project.ID, iid, "dana", robot)
	flushHooks(t, env)
	time.Sleep(time.Second)
	if replies := waitComments(t, env, iid, 1); len(replies) != 1 {
		t.Fatalf("replies %q, want still one", replies)
	}
}
