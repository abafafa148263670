package flows_test

import (
	"encoding/json"
	"testing"

	"github.com/riverqueue/river/rivertype"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
)

// TestStatusNoteRefreshesNeedNoLeader (issue 21 point 9): a transition's
// status note refresh and its backstop are stored available at their due
// times, so that any replica's River fetch runs them once due, not only
// after the elected leader's scheduler promoted them (a replica killed
// with SIGKILL stays leader until its term expires, 12–16 s of a stale
// comment). The step's own delayed poll is left scheduled.
func TestStatusNoteRefreshesNeedNoLeader(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.ToMROpened(t, flowtest.Change("svc"))
	now := h.Now()
	refreshes, polls := 0, 0
	for _, j := range h.Jobs(t) {
		var a flows.RefreshNoteArgs
		if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
			t.Fatal(err)
		}
		if a.OperationID != op.ID {
			continue
		}
		switch j.Kind {
		case rules.KindRefreshNote:
			refreshes++
			if j.State != rivertype.JobStateAvailable || !j.ScheduledAt.After(now) {
				t.Errorf("refresh (backstop %v) is %s due at %s, want available due after now (%s)", a.Backstop, j.State, j.ScheduledAt, now)
			}
		case rules.KindAwaitPipeline:
			polls++
			if j.State != rivertype.JobStateScheduled {
				t.Errorf("the pipeline poll is %s, want scheduled (only note refreshes are stored available)", j.State)
			}
		}
	}
	if refreshes != 2 || polls != 1 {
		t.Fatalf("%d refreshes and %d pipeline polls queued, want 2 (refresh and backstop) and 1", refreshes, polls)
	}
	h.RunFor(t, flowtest.Poll.NoteDelay)
	requireComment(t, h, op.ID, rules.CreateMROpened)
}
