package postgres_test

import (
	"context"
	"testing"
	"time"

	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// TestStatusNoteClaims: one live claim per MR; it ends when recorded or
// released by its holder, or when its lease runs out (a replica died), and
// a stale holder can neither release nor overwrite a newer render.
func TestStatusNoteClaims(t *testing.T) {
	t.Parallel()
	sc := pgtest.New(t)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name, NowFunc: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claim := func(iid int64) (store.NoteClaim, bool) {
		t.Helper()
		c, ok, err := s.ClaimStatusNote(ctx, 7, iid, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return c, ok
	}
	first, ok := claim(1)
	if !ok {
		t.Fatal("first claim refused")
	}
	if _, ok := claim(1); ok {
		t.Fatal("a second live claim on the same MR was granted")
	}
	if _, ok := claim(2); !ok {
		t.Fatal("a claim on another MR was refused")
	}
	if wrote, err := s.RecordStatusNote(ctx, first, store.StatusNote{ProjectID: 7, MRIID: 1, NoteID: 50, OperationID: "op_a", RenderedSeq: 4}); err != nil || !wrote {
		t.Fatalf("record: %v %v", wrote, err)
	}
	second, ok := claim(1)
	if !ok {
		t.Fatal("claim after the record released it was refused")
	}
	// The holder dies; after the lease another refresh takes the note over.
	now = now.Add(time.Minute)
	third, ok := claim(1)
	if !ok {
		t.Fatal("an expired claim was not taken over")
	}
	if err := s.ReleaseStatusNote(ctx, s.DB(), second); err != nil {
		t.Fatal(err)
	}
	if _, ok := claim(1); ok {
		t.Fatal("the stale holder released the claim that took over")
	}
	if wrote, err := s.RecordStatusNote(ctx, second, store.StatusNote{ProjectID: 7, MRIID: 1, NoteID: 50, OperationID: "op_a", RenderedSeq: 3}); err != nil || wrote {
		t.Fatalf("a stale render was recorded over a newer one: %v %v", wrote, err)
	}
	if err := s.ReleaseStatusNote(ctx, s.DB(), third); err != nil {
		t.Fatal(err)
	}
	if _, ok := claim(1); !ok {
		t.Fatal("claim after release refused")
	}
	if n, err := s.GetStatusNote(ctx, s.DB(), 7, 1); err != nil || n.RenderedSeq != 4 || n.NoteID != 50 {
		t.Fatalf("recorded note %+v %v", n, err)
	}
}

// TestStatusNoteClaimRenewal: a live holder extends its lease (the note
// stays claimed past the first lease); a holder whose claim was taken over
// learns it cannot renew (issue 10 point 6: short leases, renewed while the
// refresh writes).
func TestStatusNoteClaimRenewal(t *testing.T) {
	t.Parallel()
	sc := pgtest.New(t)
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name, NowFunc: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, ok, err := s.ClaimStatusNote(ctx, 7, 1, 5*time.Second)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	now = now.Add(4 * time.Second)
	if ok, err := s.RenewStatusNote(ctx, c, 5*time.Second); err != nil || !ok {
		t.Fatalf("renewing a live claim: %v %v", ok, err)
	}
	now = now.Add(4 * time.Second) // past the first lease, within the renewed one
	if _, ok, err := s.ClaimStatusNote(ctx, 7, 1, 5*time.Second); err != nil || ok {
		t.Fatalf("a renewed claim was taken over: %v %v", ok, err)
	}
	now = now.Add(2 * time.Second) // the holder stopped renewing: it died
	if _, ok, err := s.ClaimStatusNote(ctx, 7, 1, 5*time.Second); err != nil || !ok {
		t.Fatalf("an expired claim was not taken over: %v %v", ok, err)
	}
	if ok, err := s.RenewStatusNote(ctx, c, 5*time.Second); err != nil || ok {
		t.Fatalf("the stale holder renewed a claim taken over: %v %v", ok, err)
	}
}
