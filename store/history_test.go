package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// TestHistoryVerifiesEventsAsStored (issue 9, defect 14): the hash chain is
// checked on the events as stored, not on their upcast form. An event of an
// older schema version, upcast on read, must still verify. Not parallel: it
// registers an upcaster for the duration of the test.
func TestHistoryVerifiesEventsAsStored(t *testing.T) {
	sc := pgtest.New(t)
	s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op := store.Operation{ID: "op_old", SubjectID: "svc", TargetKey: "prod", Project: "g/r", Title: "t",
		RequestedBy: "alice", Step: 10401, Status: store.StatusApprovalSending}
	if _, _, err := s.CreateOperation(ctx, store.CreateParams{Operation: op, Event: store.EventParams{Type: store.EventSubmitted}}); err != nil {
		t.Fatal(err)
	}
	// Rewrite the first event as one of schema version 0 whose payload
	// names the field "files_count", hashed as such. Read, it goes through
	// the test's upcaster (to version 1: "files") and the real one (to
	// version 2: "file_count").
	h, err := s.ReadHistory(ctx, op.ID)
	if err != nil || len(h.Stored) != 1 {
		t.Fatalf("events: %+v %v", h, err)
	}
	old := h.Stored[0]
	old.SchemaVersion, old.Payload = 0, json.RawMessage(`{"files_count":1}`)
	if old.Hash, err = store.ComputeHash(old); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Pool.Exec(ctx, `UPDATE change_events SET schema_version = 0, payload = $2, hash = $3
		WHERE operation_id = $1 AND seq = 1`, op.ID, []byte(old.Payload), old.Hash); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.SetUpcaster(0, func(ev store.Event) store.Event {
		ev.Payload = json.RawMessage(`{"files":1}`)
		return ev
	}))

	read, err := s.ListEvents(ctx, s.DB(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if read[0].SchemaVersion != store.EventSchemaVersion || string(read[0].Payload) != `{"file_count":1}` {
		t.Fatalf("ListEvents gave %+v, want it upcast", read[0])
	}
	if _, err := store.VerifyChain(read); err == nil {
		t.Fatal("the upcast events verified: the test's upcast changes nothing the hash covers")
	}
	h, err = s.ReadHistory(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if seq, err := store.VerifyChain(h.Stored); err != nil {
		t.Fatalf("the history as stored breaks at %d: %v", seq, err)
	}
	if h.Operation.ID != op.ID || h.Operation.Step != op.Step {
		t.Fatalf("history operation %+v", h.Operation)
	}
}
