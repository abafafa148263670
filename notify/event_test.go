package notify

import (
	"testing"

	"changebot/flows/rules"
)

// TestEventFor pins the event of every step of the step table: a step
// added later fails here until it is given its event (or none).
func TestEventFor(t *testing.T) {
	t.Parallel()
	want := map[rules.StepCode]Event{
		rules.CreateStarted:         "",
		rules.CreateSucceeded:       "",
		rules.CreateMROpened:        "",
		rules.CreatePipelineFailed:  EventFailed,
		rules.CreateFailed:          EventFailed,
		rules.CreateRefused:         "",
		rules.HandleStarted:         "",
		rules.HandleApproved:        "",
		rules.HandleMerged:          EventMerged,
		rules.HandleFailed:          EventFailed,
		rules.HandleRebaseConflict:  EventFailed,
		rules.HandleRebasing:        "",
		rules.HandleReviewerDenied:  EventFailed,
		rules.HandleNotMergeable:    EventFailed,
		rules.HandleAwaitPipeline:   "",
		rules.HandleDraft:           EventNeedsPerson,
		rules.HandleRetargeted:      EventNeedsPerson,
		rules.HandleQueued:          "",
		rules.HandleInTrain:         "",
		rules.Closed:                "",
		rules.ClosedByPerson:        EventNeedsPerson,
		rules.CalledBack:            EventApplied,
		rules.ApprovalSending:       "",
		rules.ApprovalSent:          EventNeedsPerson,
		rules.ApprovalRejected:      "",
		rules.ApprovalWithdrawn:     "",
		rules.HandlePipelinePending: EventNeedsPerson,
		rules.CreatePipelinePending: EventNeedsPerson,
		rules.ApprovalSendPending:   EventNeedsPerson,
		rules.HandleRebasePending:   EventNeedsPerson,
		rules.DeployPending:         EventNeedsPerson,
		rules.HandleMergePending:    EventNeedsPerson,
		rules.StepCode(99999):       "",
	}
	for _, s := range rules.Catalogue() {
		if _, ok := want[s.Code]; !ok {
			t.Errorf("step %s (%d) has no expected event in this table", s.Name, s.Code)
		}
	}
	for code, ev := range want {
		t.Run(code.String(), func(t *testing.T) {
			t.Parallel()
			got, ok := EventFor(code)
			if got != ev || ok != (ev != "") {
				t.Fatalf("EventFor(%s) = %q, %v; want %q", code, got, ok, ev)
			}
		})
	}
}

// TestParseEvent: the four events parse, anything else names them.
func TestParseEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Event
		ok   bool
	}{
		{"failed", EventFailed, true},
		{"needs_person", EventNeedsPerson, true},
		{"merged", EventMerged, true},
		{"applied", EventApplied, true},
		{"FAILED", "", false},
		{"queued", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseEvent(tt.in)
			if got != tt.want || (err == nil) != tt.ok {
				t.Fatalf("ParseEvent(%q) = %q, %v", tt.in, got, err)
			}
		})
	}
}

// TestMoveEvent: a move raises its target's event, but a stay raises
// nothing and a merged change resumed to HANDLE_MERGED is not merged
// twice.
func TestMoveEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		from, to rules.StepCode
		want     Event
	}{
		{"merge", rules.HandleApproved, rules.HandleMerged, EventMerged},
		{"merge found by the reconciler", rules.HandleAwaitPipeline, rules.HandleMerged, EventMerged},
		{"deploy pending resumed", rules.DeployPending, rules.HandleMerged, ""},
		{"parked after the merge", rules.HandleMerged, rules.DeployPending, EventNeedsPerson},
		{"applied", rules.HandleMerged, rules.CalledBack, EventApplied},
		{"failed", rules.CreateMROpened, rules.CreatePipelineFailed, EventFailed},
		{"failed again after a retry", rules.CreateMROpened, rules.CreateFailed, EventFailed},
		{"stay", rules.HandleDraft, rules.HandleDraft, ""},
		{"no event", rules.CreateStarted, rules.CreateMROpened, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := MoveEvent(tt.from, tt.to)
			if got != tt.want || ok != (tt.want != "") {
				t.Fatalf("MoveEvent(%s, %s) = %q, %v; want %q", tt.from, tt.to, got, ok, tt.want)
			}
		})
	}
}
