package commands

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"changebot/flows/rules"
	"changebot/platform"
)

// fakeFlow is a state-based flow for the executor: one change, the actions
// it was asked for, the refusals and replies it recorded.
type fakeFlow struct {
	change  Change
	refuse  map[rules.Action]string // actions that do not apply, with the reason
	acted   []string
	refused []string
	replies int
	// approvers approve in GitLab; bodies are the replies posted.
	approvers []string
	bodies    []string
	// foreign: the merge request carries no changebot change.
	foreign bool
	// queue is the merge queue of the change's branch, which FreezeQueue
	// freezes (keeping the first freeze) and unfreezes; freezes are its
	// calls.
	queue   QueueState
	freezes []string
}

func (f *fakeFlow) FindByMR(context.Context, int64, int64) (Change, bool, error) {
	if f.foreign {
		return Change{}, false, nil
	}
	return f.change, true, nil
}

func (f *fakeFlow) Act(_ context.Context, id string, a rules.Action, p rules.ActionParams) error {
	if reason, ok := f.refuse[a]; ok {
		return &rules.NotApplicableError{Reason: reason}
	}
	act := fmt.Sprintf("%s %s by %s from %s", a, id, p.Actor, p.Source)
	if p.Reason != "" {
		act += ": " + p.Reason
	}
	f.acted = append(f.acted, act)
	return nil
}

func (f *fakeFlow) Refuse(_ context.Context, id string, p rules.ActionParams, reason string) error {
	f.refused = append(f.refused, fmt.Sprintf("%s %s: %s", p.Command, id, reason))
	return nil
}

func (f *fakeFlow) RefreshNow(context.Context, string) error { return nil }
func (f *fakeFlow) Reply(_ context.Context, _, _ int64, body string) error {
	f.replies++
	f.bodies = append(f.bodies, body)
	return nil
}
func (f *fakeFlow) IsApprover(_ context.Context, _ string, u platform.User) (bool, error) {
	return slices.Contains(f.approvers, u.Username), nil
}
func (f *fakeFlow) DecideInGitLab(context.Context, string, platform.User, string, string) error {
	return nil
}
func (f *fakeFlow) FreezeQueue(_ context.Context, id string, frozen bool, actor, reason string) (QueueState, error) {
	f.freezes = append(f.freezes, fmt.Sprintf("%s %s frozen=%v by %s: %s", id, f.change.TargetBranch, frozen, actor, reason))
	f.queue.Branch = f.change.TargetBranch
	switch {
	case frozen && f.queue.Frozen:
	case frozen:
		f.queue.Frozen, f.queue.FrozenBy, f.queue.FrozenReason = true, actor, reason
	default:
		f.queue.Frozen, f.queue.FrozenBy, f.queue.FrozenReason = false, "", ""
	}
	return f.queue, nil
}

// fakeNotes claims every note once and never rate limits.
type fakeNotes struct{ seen map[int64]bool }

func (n *fakeNotes) ClaimNote(_ context.Context, _, noteID, _ int64, _ string) (bool, error) {
	if n.seen[noteID] {
		return false, nil
	}
	n.seen[noteID] = true
	return true, nil
}
func (n *fakeNotes) SetNoteOutcome(context.Context, int64, int64, string) error { return nil }
func (n *fakeNotes) NoteActivity(context.Context, string, time.Time) (int, int, error) {
	return 1, 0, nil
}
func (n *fakeNotes) ClaimOnce(context.Context, string) (bool, error) { return true, nil }

// fakeAccess: alice is a Developer, the robot is "changebot".
type fakeAccess struct{}

func (fakeAccess) CurrentUser(context.Context) (platform.User, error) {
	return platform.User{ID: 1, Username: "changebot"}, nil
}
func (fakeAccess) ReviewerCount() int                                   { return 0 }
func (fakeAccess) Reviewer(context.Context, int) (platform.User, error) { return platform.User{}, nil }
func (fakeAccess) MemberAccess(context.Context, int64, int64) (int, error) {
	return accessDeveloper, nil
}
func (fakeAccess) MergeRequest(context.Context, int64, int64, bool) (platform.MergeRequest, error) {
	return platform.MergeRequest{}, nil
}
func (fakeAccess) MergeAccessLevel(context.Context, int64, string) (int, bool, error) {
	return accessDeveloper, true, nil
}

type fakeReplier struct{}

func (fakeReplier) Reply(kind string, _ any) (string, error) { return kind, nil }

// TestCommandsActThroughTheOneDispatch: /retry, /resume and /cancel run
// their registry entry's handler, which asks the flow's one dispatch (Act)
// with the change's operation id and the words after the command as the
// reason; an action that does not apply is refused and answered.
func TestCommandsActThroughTheOneDispatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		body        string
		step        rules.StepCode // HANDLE_FAILED unless set
		refuse      map[rules.Action]string
		wantActed   []string
		wantRefused []string
	}{
		{name: "retry", body: "/retry", wantActed: []string{"retry op_1 by alice from command:7"}},
		{name: "cancel", body: "/cancel", wantActed: []string{"cancel op_1 by alice from command:7"}},
		{name: "cancel with a reason", body: "/cancel wrong  file", wantActed: []string{"cancel op_1 by alice from command:7: wrong file"}},
		{name: "resume needs an operator", body: "/resume", step: rules.HandlePipelinePending,
			wantRefused: []string{"resume op_1: /resume needs: operators only"}},
		{name: "resume that does not apply in the state", body: "/resume",
			wantRefused: []string{"resume op_1: /resume applies to a waiting or interrupted change; this one is HANDLE_FAILED (HANDLE_FAILED)"}},
		{name: "retry that does not apply", body: "/retry", refuse: map[rules.Action]string{rules.ActionRetry: "not failed"},
			wantRefused: []string{"retry op_1: not failed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			step := tc.step
			if step == 0 {
				step = rules.HandleFailed
			}
			st := rules.MustStep(step)
			f := &fakeFlow{change: Change{OperationID: "op_1", RequestedBy: "alice", TargetBranch: "main", MRIID: 3,
				Status: st.Status, Step: st}, refuse: tc.refuse}
			x := NewExecutor(ExecutorConfig{Flow: f, Notes: &fakeNotes{seen: map[int64]bool{}}, Access: fakeAccess{}, Renderer: fakeReplier{}})
			ev := platform.HookEvent{ProjectID: 5, User: platform.User{ID: 2, Username: "alice"},
				Note: &platform.NoteHook{ID: 7, NoteableType: "MergeRequest", MRIID: 3, Body: tc.body}}
			if _, err := x.HandleNote(context.Background(), 1, ev); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.acted, tc.wantActed) || !reflect.DeepEqual(f.refused, tc.wantRefused) {
				t.Fatalf("acted %q refused %q, want acted %q refused %q", f.acted, f.refused, tc.wantActed, tc.wantRefused)
			}
			if len(tc.wantRefused) > 0 && f.replies == 0 {
				t.Error("a refusal was not answered")
			}
		})
	}
}

// TestForeignMergeRequestAnswersOnlyWhenAddressed: on a merge request that
// carries no changebot change a bare slash word is meant for another bot
// (/lgtm, /hold) or for nobody, so it gets no reply and is not claimed;
// "@changebot ..." is answered as before (issue 21.10). On changebot's own
// merge request an unknown word is still answered.
func TestForeignMergeRequestAnswersOnlyWhenAddressed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		foreign     bool
		body        string
		wantOutcome string
		wantReplies []string // reply kinds, in order
		wantClaimed bool
	}{
		{name: "another bot's command", foreign: true, body: "/lgtm", wantOutcome: OutcomeIgnored},
		{name: "two of another bot's", foreign: true, body: "/hold\n/lgtm cancel", wantOutcome: OutcomeIgnored},
		{name: "a changebot word unaddressed", foreign: true, body: "/retry", wantOutcome: OutcomeIgnored},
		{name: "addressed known command", foreign: true, body: "@changebot retry", wantOutcome: OutcomeNoChange,
			wantReplies: []string{"no_change"}, wantClaimed: true},
		{name: "addressed with a slash", foreign: true, body: "@changebot /status", wantOutcome: OutcomeNoChange,
			wantReplies: []string{"no_change"}, wantClaimed: true},
		{name: "addressed unknown command", foreign: true, body: "@changebot frobnicate", wantOutcome: OutcomeRan,
			wantReplies: []string{"unknown_command"}, wantClaimed: true},
		{name: "only the addressed one of two", foreign: true, body: "/lgtm\n@changebot help", wantOutcome: OutcomeNoChange,
			wantReplies: []string{"no_change"}, wantClaimed: true},
		{name: "unknown word on changebot's own merge request", body: "/frobnicate", wantOutcome: OutcomeRan,
			wantReplies: []string{"unknown_command"}, wantClaimed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := rules.MustStep(rules.HandleFailed)
			f := &fakeFlow{foreign: tc.foreign, change: Change{OperationID: "op_1", RequestedBy: "alice", TargetBranch: "main", MRIID: 3,
				Status: st.Status, Step: st}}
			notes := &fakeNotes{seen: map[int64]bool{}}
			x := NewExecutor(ExecutorConfig{Flow: f, Notes: notes, Access: fakeAccess{}, Renderer: fakeReplier{}})
			ev := platform.HookEvent{ProjectID: 5, User: platform.User{ID: 2, Username: "alice"},
				Note: &platform.NoteHook{ID: 7, NoteableType: "MergeRequest", MRIID: 3, Body: tc.body}}
			outcome, err := x.HandleNote(context.Background(), 1, ev)
			if err != nil {
				t.Fatal(err)
			}
			if outcome != tc.wantOutcome {
				t.Errorf("outcome %q, want %q", outcome, tc.wantOutcome)
			}
			if !reflect.DeepEqual(f.bodies, tc.wantReplies) {
				t.Errorf("replies %q, want %q", f.bodies, tc.wantReplies)
			}
			if notes.seen[7] != tc.wantClaimed {
				t.Errorf("note claimed %v, want %v", notes.seen[7], tc.wantClaimed)
			}
		})
	}
}
