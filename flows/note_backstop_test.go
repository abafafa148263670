package flows_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/store"
)

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
	requireComment(t, h, op.ID, rules.CreateMROpened)

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
