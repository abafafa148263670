package flows_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/store"
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

// noteStoreCalls counts the engine's store calls that a status note
// refresh makes beyond its first check: the history snapshot, the record's
// read and the claim's writes.
type noteStoreCalls struct {
	flows.Store
	n atomic.Int64
}

func (s *noteStoreCalls) ReadHistory(ctx context.Context, id string) (store.History, error) {
	s.n.Add(1)
	return s.Store.ReadHistory(ctx, id)
}

func (s *noteStoreCalls) GetStatusNote(ctx context.Context, db store.DBTX, platform string, projectID, iid int64) (store.StatusNote, error) {
	s.n.Add(1)
	return s.Store.GetStatusNote(ctx, db, platform, projectID, iid)
}

func (s *noteStoreCalls) ClaimStatusNote(ctx context.Context, platform string, projectID, iid int64, lease time.Duration) (store.NoteClaim, bool, error) {
	s.n.Add(1)
	return s.Store.ClaimStatusNote(ctx, platform, projectID, iid, lease)
}

func (s *noteStoreCalls) RecordStatusNote(ctx context.Context, c store.NoteClaim, n store.StatusNote) (bool, error) {
	s.n.Add(1)
	return s.Store.RecordStatusNote(ctx, c, n)
}

func (s *noteStoreCalls) ReleaseStatusNote(ctx context.Context, db store.DBTX, c store.NoteClaim) error {
	s.n.Add(1)
	return s.Store.ReleaseStatusNote(ctx, db, c)
}

// TestStatusNoteUpToDateRefreshWritesNothing (issue 12 point 2): a refresh
// that finds the comment showing the change's newest event reads that in
// one statement and stops: no history snapshot, no claim, no record, no
// GitLab call; after a new event it renders again.
func TestStatusNoteUpToDateRefreshWritesNothing(t *testing.T) {
	t.Parallel()
	calls := &noteStoreCalls{}
	h := flowtest.New(t, &flowtest.Opts{Configure: func(c *flows.EngineConfig) {
		calls.Store = c.Store
		c.Store = calls
	}})
	op := h.ToMROpened(t, flowtest.Change("svc"))
	h.RunFor(t, flowtest.Poll.NoteDelay)
	requireComment(t, h, op.ID, flows.CreateMROpened)

	ctx := context.Background()
	before, gitlabBefore := calls.n.Load(), len(h.GitLab.Calls())
	if err := h.Engine.RefreshNote(ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	if n := calls.n.Load() - before; n != 0 {
		t.Errorf("a refresh of a current comment made %d history, record or claim calls, want 0", n)
	}
	if n := len(h.GitLab.Calls()) - gitlabBefore; n != 0 {
		t.Errorf("a refresh of a current comment made %d GitLab calls, want 0", n)
	}

	if _, err := h.Store.AppendEvent(ctx, op.ID, store.EventParams{Type: store.EventRefused, Actor: "bob", Source: "api"}); err != nil {
		t.Fatal(err)
	}
	before = calls.n.Load()
	if err := h.Engine.RefreshNote(ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	if calls.n.Load() == before {
		t.Error("a refresh after a new event did not render")
	}
}
