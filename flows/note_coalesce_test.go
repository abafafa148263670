package flows_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/riverqueue/river/rivertype"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/templates"
)

// TestStatusNoteRefreshesCoalesce (issue 12 point 2): with note.delay 2 s
// (a 1 s window), the transitions of a change within one window ask for
// one refresh and one backstop, not two jobs per transition; the comment
// still shows the newest step note.delay after the first of them, and a
// transition in a later window gets a refresh of its own.
func TestStatusNoteRefreshesCoalesce(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.ToMROpened(t, flowtest.Change("svc")) // CREATE_STARTED and CREATE_MR_OPENED at one instant
	refreshes := func() (plain, backstops []*rivertype.JobRow) {
		for _, j := range h.Jobs(t, rules.KindRefreshNote) {
			var a flows.RefreshNoteArgs
			if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
				t.Fatal(err)
			}
			if a.OperationID != op.ID {
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
	plain, backstops := refreshes()
	if len(plain) != 1 || len(backstops) != 1 {
		t.Fatalf("two transitions in one window: %d refreshes and %d backstops queued, want 1 and 1", len(plain), len(backstops))
	}
	first := plain[0].ScheduledAt
	if want := h.Now().Add(flowtest.Poll.NoteDelay); !first.Equal(want) {
		t.Errorf("refresh due at %s, want note.delay after the transitions (%s)", first, want)
	}

	h.RunFor(t, flowtest.Poll.NoteDelay)
	requireComment(t, h, op.ID, rules.CreateMROpened)

	// A transition in a later window (the pipeline passes) gets its own
	// refresh, and the comment follows.
	h.DeliverWebhooks(t)
	h.WorkUntilIdle(t)
	cur := h.Op(t, op.ID)
	if cur.Step == int(rules.CreateMROpened) {
		t.Fatalf("the change did not move on: %s", rules.StepCode(cur.Step))
	}
	plain, _ = refreshes()
	if len(plain) != 1 || !plain[0].ScheduledAt.After(first) {
		t.Fatalf("after a transition in a later window: %d refreshes queued, want 1 due after %s", len(plain), first)
	}
	h.RunFor(t, flowtest.Poll.NoteDelay)
	requireComment(t, h, op.ID, rules.StepCode(h.Op(t, op.ID).Step))
}

// requireComment fails unless the status comment of operation id shows
// step.
func requireComment(t *testing.T, h *flowtest.Harness, id string, step rules.StepCode) {
	t.Helper()
	for _, n := range h.MR(t, id).Notes {
		if _, ok := templates.ParseMarker(n.Body); ok {
			if !strings.Contains(n.Body, "step "+step.String()) {
				t.Fatalf("the comment does not show %s:\n%s", step, n.Body)
			}
			return
		}
	}
	t.Fatalf("no status comment on the MR of %s", id)
}
