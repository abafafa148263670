package flows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/templates"
)

// noteBudget is how soon after a transition the status comment must show
// it (issue 10 point 6).
const noteBudget = 10 * time.Second

// TestStatusNoteCurrentAfterReplicaDiedMidRefresh (issue 10 point 6): a
// replica took the status-note job, claimed the note and died (its job
// stays "running", its claim is never released). That transition and every
// later one still show in the comment within 10 s of the injected clock,
// not once a lease or River's rescuer lets go minutes later.
func TestStatusNoteCurrentAfterReplicaDiedMidRefresh(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	h.RequirePostgres(t, "marks a river_job row running with PostgreSQL SQL (now()) through h.Schema.Pool")
	ctx := context.Background()
	op := h.ToMROpened(t, flowtest.Change("svc"))
	iid := h.Op(t, op.ID).MRIID

	// The dying replica: it took the transitions' note jobs (due together
	// after note.delay), they stay running, its claim was taken with the
	// engine's lease; nothing will ever release either.
	tag, err := h.Schema.Pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now()
		WHERE kind = $1 AND state IN ('scheduled', 'available') AND NOT (args ? 'backstop')`, rules.KindRefreshNote)
	if err != nil || tag.RowsAffected() == 0 {
		t.Fatalf("leaving the note job running: %v (%d rows)", err, tag.RowsAffected())
	}
	if _, ok, err := h.Store.ClaimStatusNote(ctx, op.Platform, op.ProjectID, iid, flows.NoteClaimLease); err != nil || !ok {
		t.Fatalf("claiming the note as the dying replica: %v %v", ok, err)
	}

	requireCurrent := func(when string) {
		t.Helper()
		h.RunFor(t, noteBudget)
		cur := h.Op(t, op.ID)
		events := h.Events(t, op.ID)
		last := events[len(events)-1].Seq
		var body string
		for _, n := range h.MR(t, op.ID).Notes {
			if _, ok := templates.ParseMarker(n.Body); ok {
				body = n.Body
			}
		}
		step := rules.StepCode(cur.Step).String()
		if !strings.Contains(body, "<sub>"+cur.Status+" · step "+step) {
			t.Fatalf("%s: %s after %s the comment does not show %s/%s:\n%s", when, noteBudget, when, cur.Status, step, body)
		}
		rec, err := h.Store.GetStatusNote(ctx, h.Store.DB(), op.Platform, op.ProjectID, iid)
		if err != nil || rec.RenderedSeq != last {
			t.Fatalf("%s: note record %+v (%v), want it to show event %d", when, rec, err, last)
		}
	}
	requireCurrent("the MR opened") // the transition whose refresh died
	h.DeliverWebhooks(t)            // the MR pipeline passes: approve, merge
	h.WorkUntilIdle(t)
	h.RequireStep(t, op.ID, rules.HandleMerged)
	requireCurrent("the merge")
	h.DeliverWebhooks(t) // the deploy pipeline passes
	h.WorkUntilIdle(t)
	if st := h.Op(t, op.ID).Status; st != "VALIDATED" {
		t.Fatalf("status %s after the deploy pipeline passed, want VALIDATED", st)
	}
	requireCurrent("VALIDATED")
}
