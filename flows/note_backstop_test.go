package flows_test

import (
	"encoding/json"
	"testing"

	"github.com/riverqueue/river/rivertype"

	"changebot/flows"
	"changebot/flows/flowtest"
)

// noteJobs lists the unfinished status note refreshes of operation id:
// the plain ones and the backstops.
func noteJobs(t *testing.T, h *flowtest.Harness, id string) (plain, backstops []*rivertype.JobRow) {
	t.Helper()
	for _, j := range h.Jobs(t, flows.KindRefreshNote) {
		var a flows.RefreshNoteArgs
		if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
			t.Fatal(err)
		}
		if a.OperationID != id {
			continue
		}
		if a.Backstop {
			backstops = append(backstops, j)
		} else {
			plain = append(plain, j)
		}
	}
	return plain, backstops
}

// TestStatusNoteBackstopsCoalesce (issue 12 point 2): transitions in
// different refresh windows, but within one backstop window, each get a
// refresh of their own and share one backstop, due after the first
// transition's refresh; the backstop still finds the comment current.
func TestStatusNoteBackstopsCoalesce(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.ToMROpened(t, flowtest.Change("svc")) // CREATE_STARTED and CREATE_MR_OPENED at one instant
	plain, backstops := noteJobs(t, h, op.ID)
	if len(plain) != 1 || len(backstops) != 1 {
		t.Fatalf("two transitions at one instant: %d refreshes and %d backstops queued, want 1 and 1", len(plain), len(backstops))
	}
	backstopAt := backstops[0].ScheduledAt

	h.RunFor(t, flowtest.Poll.NoteDelay) // the first refresh runs
	requireComment(t, h, op.ID, flows.CreateMROpened)
	// Later transitions (the pipeline passes), note.delay after the first:
	// a refresh window of their own, the first backstop still pending.
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	if h.Op(t, op.ID).Step == int(flows.CreateMROpened) {
		t.Fatal("the change did not move on")
	}
	plain, backstops = noteJobs(t, h, op.ID)
	if len(plain) != 1 {
		t.Fatalf("after a transition in a later refresh window: %d refreshes queued, want 1", len(plain))
	}
	if len(backstops) != 1 || !backstops[0].ScheduledAt.Equal(backstopAt) {
		t.Fatalf("after a transition in a later refresh window: %d backstops queued, want the first one alone (due %s)", len(backstops), backstopAt)
	}
	if !backstopAt.After(plain[0].ScheduledAt) {
		t.Errorf("the shared backstop is due at %s, before the later transition's refresh (%s)", backstopAt, plain[0].ScheduledAt)
	}
	h.RunFor(t, backstopAt.Sub(h.Now()))
	requireComment(t, h, op.ID, flows.StepCode(h.Op(t, op.ID).Step))
	if _, backstops = noteJobs(t, h, op.ID); len(backstops) != 0 {
		t.Errorf("%d backstops left after the shared one's time", len(backstops))
	}
}
