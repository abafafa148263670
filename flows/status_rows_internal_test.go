package flows

import (
	"encoding/json"
	"testing"

	"changebot/flows/rules"
	"changebot/store"
)

// TestDescribeEvent pins what a timeline row says of each kind of event
// (issue 23 point 5), from the event's type, payload, actor and step, in
// the words of the change's platform, and which events are no rows.
func TestDescribeEvent(t *testing.T) {
	t.Parallel()
	gl, gh := rules.WordsOf(store.PlatformGitLab), rules.WordsOf(store.PlatformGitHub)
	tests := []struct {
		name    string
		w       rules.Words
		ev      store.Event
		payload map[string]any
		want    string
		kind    rowKind
	}{
		{name: "submitted", w: gl, ev: store.Event{Type: store.EventSubmitted, Actor: "alice"},
			payload: map[string]any{"file_count": 3}, want: "submitted by alice (3 files)"},
		{name: "submitted, schema version 1", w: gl, ev: store.Event{Type: store.EventSubmitted, Actor: "alice"},
			payload: map[string]any{"files": 1}, want: "submitted by alice (1 file)"},
		{name: "cancel with a reason", w: gl, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.Closed), Actor: "olivia"},
			payload: map[string]any{"command": "cancel", "reason": "wrong file"}, want: "cancelled by olivia: wrong file"},
		{name: "cancel through the API", w: gl, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.Closed), Actor: "api:9477b34a9c25f76", Source: "api"},
			payload: map[string]any{"command": "cancel"}, want: "cancelled by token 9477b34a9c25f76"},
		{name: "retry from the web pages", w: gl, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.CreateMROpened), Actor: "api:9477b34a9c25f76", Source: "web"},
			payload: map[string]any{"command": "retry", "reason": "runner fixed"}, want: "retried by token 9477b34a9c25f76: runner fixed"},
		{name: "retry", w: gl, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.CreateStarted), Actor: "dave"},
			payload: map[string]any{"command": "retry"}, want: "retried by dave"},
		{name: "resume in place", w: gl, ev: store.Event{Type: store.EventCommand, ToStep: int(rules.HandleStarted), Actor: "olivia"},
			payload: map[string]any{"command": "resume", "resumed_step": "HANDLE_STARTED"}, want: "resumed by olivia"},
		{name: "refused with the recorded kind", w: gl, ev: store.Event{Type: store.EventRefused, Actor: "dave"},
			payload: map[string]any{"command": "cancel", "because": "role", "reason": "/cancel needs: operators only"}, want: "/cancel refused: role — operators only"},
		{name: "refused by the approval system", w: gl, ev: store.Event{Type: store.EventRefused, Actor: "dave"},
			payload: map[string]any{"command": "approve", "reason": "approvals of this change come from the approval system"},
			want:    "/approve refused: approval system — approvals of this change come from the approval system"},
		{name: "approval from the approval system", w: gl, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.CreateStarted), Actor: "approval:carol", Source: "callback:r1"},
			payload: map[string]any{"decision": "approved", "ticket_id": "T-1"}, want: "approved by carol"},
		{name: "one of two approvals in GitLab", w: gl, ev: store.Event{Type: EventApproval, Actor: "carol"},
			payload: map[string]any{"approvals": 1, "required": 2}, want: "approved by carol (1 of 2)"},
		{name: "rejected", w: gl, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.ApprovalRejected), Actor: "approval:carol"},
			payload: map[string]any{"decision": "rejected"}, want: "rejected by carol"},
		{name: "checks passed on GitHub", w: gh, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.CreateSucceeded), Actor: "github"},
			payload: map[string]any{"pipeline_id": 12, "pipeline_status": "success"}, want: "checks (run 12) passed"},
		{name: "pipeline canceled", w: gl, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.CreatePipelineFailed), Actor: "gitlab"},
			payload: map[string]any{"pipeline_id": 5003, "pipeline_status": "canceled"}, want: "pipeline 5003 canceled"},
		{name: "pull request opened", w: gh, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.CreateMROpened), Actor: ActorBot},
			payload: map[string]any{"mr_iid": 7}, want: "pull request #7 opened"},
		{name: "merged by a person", w: gl, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.HandleMerged), Actor: "dave"},
			payload: map[string]any{"merged_by": "dave"}, want: "merged by dave"},
		{name: "applied on GitHub", w: gh, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.CalledBack), Actor: "github"},
			payload: map[string]any{"pipeline_id": 77}, want: "applied: the deploy run passed"},
		{name: "applied by a deploy callback", w: gl, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.CalledBack), Actor: "deploy"},
			payload: map[string]any{"mr_iid": 7}, want: "applied: the deploy reported success"},
		{name: "a pipeline run again", w: gl, ev: store.Event{Type: store.EventAttempt, ToStep: int(rules.HandleAwaitPipeline)},
			payload: map[string]any{"action": actionPipelineRetried, "failed_pipeline_id": 5003, "pipeline_id": 5004, "retry": 1},
			want:    "pipeline 5003 failed: ran it again as pipeline 5004 (retry 1)"},
		{name: "queue frozen", w: gl, ev: store.Event{Type: store.EventAttempt, ToStep: int(rules.HandleQueued)},
			payload: map[string]any{"action": "queue_frozen", "queue": "main", "frozen_by": "olivia", "frozen_reason": "main is red"},
			want:    "merge queue of main frozen by olivia: main is red"},
		{name: "closed in GitHub by a person", w: gh, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.ClosedByPerson), Actor: "dave"},
			payload: map[string]any{"closed_by": "dave", "mr_iid": 7}, want: "pull request closed by dave in GitHub"},
		{name: "cleanup after a cancel", w: gl, ev: store.Event{Type: store.EventCleanup, Actor: ActorBot},
			payload: map[string]any{"closed_mr_iid": 7, "deleted_branch": true}, want: "cleaned up after the cancel: closed merge request !7 and deleted its branch"},
		{name: "sweeper", w: gl, ev: store.Event{Type: store.EventTransition, FromStep: int(rules.HandleStarted), ToStep: int(rules.HandleStarted), Actor: ActorSweeper},
			payload: map[string]any{"resumed_step": "HANDLE_STARTED", "reason": "no live job since 2026-03-09T14:00:00Z"},
			want:    "restarted by the sweeper: no live job since 2026-03-09T14:00:00Z"},
		{name: "a failure's detail on one line, cut", w: gl, ev: store.Event{Type: store.EventTransition, ToStep: int(rules.HandleFailed), Actor: ActorBot},
			payload: map[string]any{"detail": "approving as reviewer-2 failed\n6 times"}, want: "failed: approving as reviewer-2 failed 6 times"},
		{name: "merge claim", w: gl, ev: store.Event{Type: store.EventClaim, Actor: ActorBot},
			payload: map[string]any{"action": "merge_claimed"}, kind: rowBookkeeping},
		{name: "merge refusal followed", w: gl, ev: store.Event{Type: store.EventAttempt, Actor: ActorBot},
			payload: map[string]any{"action": "merge_refusal_followed"}, kind: rowBookkeeping},
		{name: "retried approve", w: gl, ev: store.Event{Type: store.EventAttempt, Actor: ActorBot},
			payload: map[string]any{"action": "approve", "attempt": 2}, kind: rowRetriedCall},
		{name: "job retried after an error", w: gl, ev: store.Event{Type: store.EventAttempt, Actor: ActorBot},
			payload: map[string]any{"attempt": 2, "detail": "retrying (attempt 2 of 5): GitLab answered 503"}, kind: rowRetriedCall},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw, err := json.Marshal(tc.payload)
			if err != nil {
				t.Fatal(err)
			}
			tc.ev.Payload = raw
			got, kind := describeEvent(tc.w, tc.ev, payloadOf(tc.ev))
			if kind != tc.kind || (tc.kind == rowShown && got != tc.want) {
				t.Errorf("describeEvent = %q (kind %d), want %q (kind %d)", got, kind, tc.want, tc.kind)
			}
		})
	}
}

// TestDescribeEventCutsLongReasons: a person's long reason is cut on the
// row (the change's page has it whole).
func TestDescribeEventCutsLongReasons(t *testing.T) {
	t.Parallel()
	long := make([]rune, 400)
	for i := range long {
		long[i] = 'é'
	}
	raw, _ := json.Marshal(map[string]any{"command": "cancel", "reason": string(long)})
	got, _ := describeEvent(rules.WordsOf(""), store.Event{Type: store.EventTransition, ToStep: int(rules.Closed), Actor: "olivia", Payload: raw}, nil)
	if n := len([]rune(got)); n > len("cancelled by olivia: ")+maxRowDetail {
		t.Errorf("row of %d characters: %q", n, got)
	}
}
