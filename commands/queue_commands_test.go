package commands

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/templates"
)

// runOn runs one note by user on the change of f on an installation of
// platformName ("" is GitLab), with the real templates; the note's
// author's roles are the reply tests' (ops is the operator).
func runOn(t *testing.T, platformName string, f *fakeFlow, user, body string) {
	t.Helper()
	r, err := templates.NewRenderer(nil)
	if err != nil {
		t.Fatal(err)
	}
	x := NewExecutor(ExecutorConfig{Flow: f, Notes: &fakeNotes{seen: map[int64]bool{}}, Access: access, Renderer: r,
		Platform: platformName, Operators: []string{"ops"}})
	ev := platform.HookEvent{ProjectID: 5, User: platform.User{ID: userIDs[user], Username: user},
		Note: &platform.NoteHook{ID: 7, NoteableType: "MergeRequest", MRIID: 3, Body: body}}
	if _, err := x.HandleNote(context.Background(), 1, ev); err != nil {
		t.Fatal(err)
	}
}

// TestFreezeCommands: an operator's /freeze freezes the merge queue of
// the change's target branch with the words after it as the reason (the
// merge request named when there are none), in any state of the change,
// and /unfreeze unfreezes it; the reply says how the queue is now, and
// that another operator's freeze stays.
func TestFreezeCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		platform string
		step     rules.StepCode
		queue    QueueState // before the note
		body     string
		freezes  []string
		reply    string // the reply's first line
	}{
		{name: "freeze with a reason", step: rules.HandleQueued, body: "/freeze main is red, see #ops",
			freezes: []string{"op_1 main frozen=true by ops: main is red, see #ops"},
			reply:   "The merge queue of `main` is frozen: main is red, see #ops."},
		{name: "freeze without a reason names the merge request", step: rules.HandleQueued, body: "/freeze",
			freezes: []string{"op_1 main frozen=true by ops: /freeze on !3"},
			reply:   "The merge queue of `main` is frozen: /freeze on !3."},
		{name: "freeze without a reason on GitHub", platform: "github", step: rules.HandleQueued, body: "/freeze",
			freezes: []string{"op_1 main frozen=true by ops: /freeze on #3"},
			reply:   "The merge queue of `main` is frozen: /freeze on #3."},
		{name: "freeze from a merged change", step: rules.HandleMerged, body: "@changebot freeze this broke main",
			freezes: []string{"op_1 main frozen=true by ops: this broke main"},
			reply:   "The merge queue of `main` is frozen: this broke main."},
		{name: "control and bidi characters dropped from the reason", step: rules.HandleQueued, body: "/freeze red\u202e\u0007 main\u0085",
			freezes: []string{"op_1 main frozen=true by ops: red main"},
			reply:   "The merge queue of `main` is frozen: red main."},
		{name: "a reason cut at 500 characters", step: rules.HandleQueued, body: "/freeze " + strings.Repeat("é", 600),
			freezes: []string{"op_1 main frozen=true by ops: " + strings.Repeat("é", 499) + "…"},
			reply:   "The merge queue of `main` is frozen: " + strings.Repeat("é", 499) + "…."},
		{name: "freezing a frozen queue keeps the first freeze", step: rules.HandleQueued, body: "/freeze again",
			queue:   QueueState{Branch: "main", Frozen: true, FrozenBy: "olivia", FrozenReason: "release"},
			freezes: []string{"op_1 main frozen=true by ops: again"},
			reply:   "The merge queue of `main` was already frozen by olivia (release); that freeze stays."},
		{name: "unfreeze", step: rules.HandleQueued, body: "/unfreeze fixed by !44",
			queue:   QueueState{Branch: "main", Frozen: true, FrozenBy: "olivia", FrozenReason: "release"},
			freezes: []string{"op_1 main frozen=false by ops: fixed by !44"},
			reply:   "The merge queue of `main` is unfrozen: the first change waiting moves on."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := change(tc.step)
			c.Platform = tc.platform
			f := &fakeFlow{change: c, queue: tc.queue}
			runOn(t, tc.platform, f, "ops", tc.body)
			if !reflect.DeepEqual(f.freezes, tc.freezes) || len(f.refused) != 0 || len(f.acted) != 0 {
				t.Fatalf("freezes %q refused %q acted %q, want freezes %q", f.freezes, f.refused, f.acted, tc.freezes)
			}
			if len(f.bodies) != 1 {
				t.Fatalf("replies %q, want one", f.bodies)
			}
			if first, _, _ := strings.Cut(f.bodies[0], "\n"); first != tc.reply {
				t.Errorf("reply reads\n%s\nwant\n%s", first, tc.reply)
			}
		})
	}
}

// TestFreezeNeedsAnOperator: /freeze and /unfreeze need the operator
// role, as /resume does: the requester, a Maintainer and a stranger are
// refused naming the role, the refusal is recorded in the change's
// history and the queue is not touched.
func TestFreezeNeedsAnOperator(t *testing.T) {
	t.Parallel()
	for _, user := range []string{"alice", "maint", "guest"} {
		for _, body := range []string{"/freeze main is red", "/unfreeze"} {
			t.Run(user+" "+body, func(t *testing.T) {
				t.Parallel()
				f := &fakeFlow{change: change(rules.HandleQueued)}
				runOn(t, "", f, user, body)
				name := strings.Fields(body)[0][1:]
				want := "`/" + name + "` was not run because of your role: it is for operators only."
				if len(f.freezes) != 0 || !reflect.DeepEqual(f.refused, []string{name + " op_1: /" + name + " needs: operators only"}) {
					t.Fatalf("freezes %q refused %q, want one refusal and no freeze", f.freezes, f.refused)
				}
				if len(f.bodies) != 1 || !strings.HasPrefix(f.bodies[0], want) {
					t.Errorf("replies %q, want one starting %q", f.bodies, want)
				}
			})
		}
	}
	resume, _ := Lookup(NameResume)
	for _, name := range []string{NameFreeze, NameUnfreeze} {
		c, _ := Lookup(name)
		if !reflect.DeepEqual(c.Who, resume.Who) || c.WhoText != resume.WhoText {
			t.Errorf("/%s is for %v (%s), want /resume's %v (%s)", name, c.Who, c.WhoText, resume.Who, resume.WhoText)
		}
	}
}

// TestFreezeWithoutTargetBranch: a change whose target branch is not
// known yet names no queue: /freeze is refused for the change's state.
func TestFreezeWithoutTargetBranch(t *testing.T) {
	t.Parallel()
	c := change(rules.CreateStarted)
	c.TargetBranch = ""
	f := &fakeFlow{change: c}
	runOn(t, "", f, "ops", "/freeze")
	if len(f.freezes) != 0 || len(f.refused) != 1 || !strings.Contains(f.refused[0], "target branch, which is not known yet") {
		t.Errorf("freezes %q refused %q, want a refusal naming the unknown target branch", f.freezes, f.refused)
	}
}
