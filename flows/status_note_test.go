package flows_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/templates"
)

// TestStatusNoteRefreshHoldsNothingAcrossGitLab (issue 9, defect 15): a
// status note refresh claims the note, calls GitLab holding no database
// connection or lock, then records: during its GitLab call another refresh
// of the same MR returns at once instead of waiting, and once it has
// recorded, the next refresh edits the note again.
func TestStatusNoteRefreshHoldsNothingAcrossGitLab(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	h.RequirePostgres(t, "counts acquired connections of the PostgreSQL pool (pgxpool Stat)")
	ctx := context.Background()
	op := h.ToMROpened(t, flowtest.Change("svc"))
	h.RunFor(t, flowtest.Poll.NoteDelay)
	edits := func() int { return h.GitLab.CallCount("PUT", "/api/v4/projects/*/merge_requests/*/notes/*") }
	notes := func() int { return h.GitLab.CallCount("POST", "/api/v4/projects/*/merge_requests/*/notes") }
	if notes() != 1 {
		t.Fatalf("status notes created: %d, want 1", notes())
	}

	var mu sync.Mutex
	inFlight, acquired := false, int32(-1)
	var second error
	var secondTook time.Duration
	h.GitLab.SetBeforeCall(func(method, path string) {
		mu.Lock()
		defer mu.Unlock()
		if inFlight || method != "PUT" || !strings.Contains(path, "/notes/") {
			return
		}
		inFlight = true
		acquired = h.Schema.Pool.Stat().AcquiredConns()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		second = h.Engine.RefreshNow(sctx, h.Op(t, op.ID))
		secondTook = time.Since(start)
	})
	before := edits()
	if err := h.Engine.RefreshNow(ctx, h.Op(t, op.ID)); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	h.GitLab.SetBeforeCall(nil)
	if !inFlight {
		t.Fatal("the refresh never edited the note")
	}
	if acquired != 0 {
		t.Errorf("%d database connections held while GitLab edits the note, want 0", acquired)
	}
	if second != nil || secondTook > 2*time.Second {
		t.Errorf("a second refresh during the GitLab call: %v after %s, want it to return at once", second, secondTook)
	}
	if got := edits() - before; got != 1 {
		t.Errorf("note edits: %d, want 1 (the second refresh leaves it to the one in flight)", got)
	}
	// Recorded and released: the next refresh edits again.
	if err := h.Engine.RefreshNow(ctx, h.Op(t, op.ID)); err != nil {
		t.Fatal(err)
	}
	if got := edits() - before; got != 2 || notes() != 1 {
		t.Fatalf("after the claim is released: %d edits, %d notes; want 2 and 1", got, notes())
	}
}

// TestStatusNoteRefreshJobWaitsForTheClaim: a refresh job that finds the
// note claimed by a refresh in flight elsewhere snoozes, and once the claim
// is gone it shows the newest state.
func TestStatusNoteRefreshJobWaitsForTheClaim(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	ctx := context.Background()
	op := h.ToMROpened(t, flowtest.Change("svc"))
	h.RunFor(t, flowtest.Poll.NoteDelay)
	claim, ok, err := h.Store.ClaimStatusNote(ctx, op.Platform, op.ProjectID, h.Op(t, op.ID).MRIID, time.Hour)
	if err != nil || !ok {
		t.Fatalf("claiming as another replica: %v %v", ok, err)
	}
	h.DeliverWebhooks(t) // the pipeline passes: the change moves on
	worked := h.WorkUntilIdle(t)
	h.Advance(flowtest.Poll.NoteDelay)
	worked = append(worked, h.WorkUntilIdle(t)...)
	var snoozed int
	for _, w := range worked {
		if w.Kind == rules.KindRefreshNote && w.Event == river.EventKindJobSnoozed {
			snoozed++
		}
	}
	if snoozed == 0 {
		t.Fatalf("no refresh job snoozed while the note was claimed: %v", worked)
	}
	if err := h.Store.ReleaseStatusNote(ctx, h.Store.DB(), claim); err != nil {
		t.Fatal(err)
	}
	h.RunFor(t, time.Minute)
	last := h.Events(t, op.ID)
	rec, err := h.Store.GetStatusNote(ctx, h.Store.DB(), op.Platform, op.ProjectID, h.Op(t, op.ID).MRIID)
	if err != nil || rec.RenderedSeq != last[len(last)-1].Seq {
		t.Fatalf("note record %+v (%v), want it to show event %d", rec, err, last[len(last)-1].Seq)
	}
}

// TestStatusNoteFirstWriteLooksOnlyAfterAnUnknownCreate (issue 24 point 3):
// the first status note of a change is created without listing the MR's
// notes, and a create whose answer was lost after GitLab posted the note
// (a 502 after the effect) keeps the note's claim: the refresh that takes
// it over once it expired lists the notes, finds ours by its marker and
// edits it, so the MR holds one status note.
func TestStatusNoteFirstWriteLooksOnlyAfterAnUnknownCreate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		lost      bool
		wantLists int
	}{
		{name: "created", lost: false, wantLists: 0},
		{name: "answer lost after the create", lost: true, wantLists: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, nil)
			if tc.lost {
				h.GitLab.InjectFault(gitlabfake.Fault{Method: "POST", PathPattern: "/api/v4/projects/*/merge_requests/*/notes",
					Status: 502, Times: 1, AfterEffect: true})
			}
			op := h.ToMROpened(t, flowtest.Change("svc"))
			h.RunFor(t, time.Minute) // the refresh, its backstop past the claim's lease
			lists := h.GitLab.CallCount("GET", "/api/v4/projects/*/merge_requests/*/notes")
			creates := h.GitLab.CallCount("POST", "/api/v4/projects/*/merge_requests/*/notes")
			if lists != tc.wantLists {
				t.Errorf("notes listed %d times, want %d", lists, tc.wantLists)
			}
			if creates != 1 {
				t.Errorf("notes created %d times, want 1 (one status note on the MR)", creates)
			}
			o := h.Op(t, op.ID)
			mr, _ := h.GitLab.MergeRequest(o.ProjectID, o.MRIID)
			ours := 0
			for _, n := range mr.Notes {
				if strings.Contains(n.Body, templates.Marker(op.ID)) {
					ours++
				}
			}
			if ours != 1 {
				t.Errorf("status notes on the MR: %d, want 1", ours)
			}
		})
	}
}
