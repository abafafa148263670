package flows_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/flowtest"
	"changebot/flows/rules"
	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// v1Fixture is testdata/events_v1.json: a change's whole history written by
// the schema version 1 code (origin in testdata/README.md).
type v1Fixture struct {
	Operation struct {
		ID     string `json:"id"`
		Step   int    `json:"step"`
		Status string `json:"status"`
	} `json:"operation"`
	Events []store.Event `json:"events"`
}

func loadV1(t *testing.T) (v1Fixture, store.History) {
	t.Helper()
	b, err := os.ReadFile("testdata/events_v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var f v1Fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, ev := range f.Events {
		if ev.SchemaVersion != 1 {
			t.Fatalf("fixture event %d has schema version %d, want 1", ev.Seq, ev.SchemaVersion)
		}
	}
	return f, store.History{Operation: store.Operation{ID: f.Operation.ID, Step: f.Operation.Step, Status: f.Operation.Status},
		Stored: f.Events}
}

// submittedPayload decodes the submitted event's payload.
func submittedPayload(t *testing.T, ev store.Event) map[string]any {
	t.Helper()
	if ev.Type != store.EventSubmitted {
		t.Fatalf("event %d is %s, want submitted", ev.Seq, ev.Type)
	}
	var m map[string]any
	if err := json.Unmarshal(ev.Payload, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestV1FixtureReplaysAndVerifies (issue 13 point 5): a history of schema
// version 1 verifies on its stored form, and read upcast (version 2) it
// replays to the stored state with the submitted event's "files" renamed
// "file_count".
func TestV1FixtureReplaysAndVerifies(t *testing.T) {
	t.Parallel()
	f, h := loadV1(t)
	if err := flows.Verify(h); err != nil {
		t.Fatalf("the v1 fixture does not verify: %v", err)
	}
	events := h.Events()
	if st := flows.Replay(events, events[len(events)-1].OccurredAt); int(st.Step) != f.Operation.Step ||
		st.Status != f.Operation.Status || st.Seq != int64(len(events)) {
		t.Fatalf("replay gives %+v, want %d/%s", st, f.Operation.Step, f.Operation.Status)
	}
	for _, ev := range events {
		if ev.SchemaVersion != store.EventSchemaVersion {
			t.Fatalf("event %d read as version %d, want %d", ev.Seq, ev.SchemaVersion, store.EventSchemaVersion)
		}
	}
	p := submittedPayload(t, events[0])
	if _, ok := p["files"]; ok || p["file_count"] != float64(1) {
		t.Fatalf("upcast submitted payload %v, want file_count 1 and no files", p)
	}
	if string(h.Stored[0].Payload) == string(events[0].Payload) || h.Stored[0].SchemaVersion != 1 {
		t.Fatal("upcasting changed the stored event")
	}
	// The hash covers the stored form: the upcast events do not verify.
	if _, err := store.VerifyChain(events); err == nil {
		t.Fatal("the upcast events verified: the upcast changed nothing the hash covers")
	}
	// And the check is real: a stored payload changed breaks the chain.
	tampered := append([]store.Event(nil), h.Stored...)
	tampered[0].Payload = json.RawMessage(`{"files":2,"project":"g/config","approval_first":true}`)
	if err := flows.Verify(store.History{Operation: h.Operation, Stored: tampered}); err == nil ||
		!strings.Contains(err.Error(), "event 1") {
		t.Fatalf("a tampered v1 event: %v, want the chain broken at event 1", err)
	}
}

// TestV1FixtureThroughPostgres: the v1 fixture stored in PostgreSQL (jsonb
// reorders payload keys) reads back, verifies as stored and lists upcast,
// like a history written today (version 2).
func TestV1FixtureThroughPostgres(t *testing.T) {
	t.Parallel()
	flowtest.SkipOnSQLite(t, "replays through a PostgreSQL store it builds itself (pgtest)")
	f, _ := loadV1(t)
	sc := pgtest.New(t)
	s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op := store.Operation{ID: f.Operation.ID, SubjectID: "svc-v1", TargetKey: "prod", Project: "g/config", Title: "t",
		RequestedBy: "alice", Step: f.Operation.Step, Status: f.Operation.Status}
	if _, _, err := s.CreateOperation(ctx, store.CreateParams{Operation: op, Event: store.EventParams{Type: store.EventSubmitted}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Pool.Exec(ctx, `DELETE FROM change_events WHERE operation_id = $1`, op.ID); err != nil {
		t.Fatal(err)
	}
	for _, ev := range f.Events {
		if _, err := sc.Pool.Exec(ctx, `INSERT INTO change_events (operation_id, seq, type, from_step, to_step,
			from_status, to_status, actor, source, payload, schema_version, occurred_at, prev_hash, hash)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`, ev.OperationID, ev.Seq, ev.Type,
			ev.FromStep, ev.ToStep, ev.FromStatus, ev.ToStatus, ev.Actor, ev.Source, []byte(ev.Payload),
			ev.SchemaVersion, ev.OccurredAt, ev.PrevHash, ev.Hash); err != nil {
			t.Fatal(err)
		}
	}
	h, err := s.ReadHistory(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := flows.Verify(h); err != nil {
		t.Fatalf("the stored v1 history does not verify: %v", err)
	}
	listed, err := s.ListEvents(ctx, s.DB(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p := submittedPayload(t, listed[0]); p["file_count"] != float64(1) || listed[0].SchemaVersion != 2 {
		t.Fatalf("listed submitted event %+v, want it upcast to version 2", listed[0])
	}
}

// TestNewEventsAreVersion2: a change submitted today writes schema version
// 2 ("file_count") and verifies like the v1 fixture.
func TestNewEventsAreVersion2(t *testing.T) {
	t.Parallel()
	h := flowtest.New(t, nil)
	op := h.Submit(t, flowtest.Change("svc"))
	hist, err := h.Store.ReadHistory(context.Background(), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := flows.Verify(hist); err != nil {
		t.Fatal(err)
	}
	ev := hist.Stored[0]
	if p := submittedPayload(t, ev); ev.SchemaVersion != 2 || p["file_count"] != float64(1) || p["files"] != nil {
		t.Fatalf("stored submitted event %+v, want version 2 with file_count", ev)
	}
}

// TestReplayFromSnapshotEqualsReplayFromStart (issue 13 point 5): a
// change of 120 events replayed with snapshots every 50 events gives, at
// every moment, the state replaying every event from the first gives; the
// first replay stores snapshots at events 50 and 100, and a later replay
// starts from the nearest one, reading only the events after it.
func TestReplayFromSnapshotEqualsReplayFromStart(t *testing.T) {
	t.Parallel()
	flowtest.SkipOnSQLite(t, "replays through a PostgreSQL store it builds itself (pgtest)")
	sc := pgtest.New(t)
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name, NowFunc: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op := store.Operation{ID: "op_long", SubjectID: "svc", TargetKey: "prod", Project: "g/r", Title: "t",
		RequestedBy: "alice", Step: int(rules.ApprovalSending), Status: store.StatusApprovalSending}
	if _, _, err := s.CreateOperation(ctx, store.CreateParams{Operation: op, Event: store.EventParams{Type: store.EventSubmitted}}); err != nil {
		t.Fatal(err)
	}
	// Moves and refusals, a minute apart: the state changes along the way.
	steps := []rules.StepCode{rules.ApprovalSent, rules.CreateStarted, rules.CreateSucceeded}
	for i := 2; i <= 120; i++ {
		now = now.Add(time.Minute)
		if i%40 == 0 {
			to := steps[i/40-1]
			cur, err := s.GetOperation(ctx, s.DB(), op.ID)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.ApplyTransition(ctx, store.TransitionParams{OperationID: op.ID, ExpectStep: cur.Step,
				ExpectVersion: cur.Version, ToStep: int(to), ToStatus: rules.MustStep(to).Status,
				Event: store.EventParams{Type: store.EventTransition}}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := s.AppendEvent(ctx, op.ID, store.EventParams{Type: store.EventRefused, Actor: "bob", Source: "api"}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.ListEvents(ctx, s.DB(), op.ID)
	if err != nil || len(all) != 120 {
		t.Fatalf("events: %d %v", len(all), err)
	}
	// The first replay (now) stores the snapshots and reads every event.
	got, read, err := flows.ReplaySnapshots(ctx, s, op.ID, time.Time{}, 50)
	if err != nil || got != flows.Replay(all, time.Time{}) || read != 120 || got.Step != rules.CreateSucceeded {
		t.Fatalf("first replay: %+v, %d events read, %v; from the start: %+v", got, read, err, flows.Replay(all, time.Time{}))
	}
	var snaps int
	if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM change_snapshots WHERE operation_id = $1 AND seq IN (50, 100)`, op.ID).Scan(&snaps); err != nil || snaps != 2 {
		t.Fatalf("snapshots at 50 and 100: %d %v", snaps, err)
	}
	cases := []struct {
		name string
		at   time.Time
		read int // events read after the nearest snapshot
	}{
		{"before the first event", all[0].OccurredAt.Add(-time.Second), 120},
		{"at event 10", all[9].OccurredAt, 120},
		{"at event 50, a snapshot", all[49].OccurredAt, 70},
		{"at event 80, a transition", all[79].OccurredAt, 70},
		{"at event 99", all[98].OccurredAt, 70},
		{"between 100 and 101", all[99].OccurredAt.Add(30 * time.Second), 20},
		{"at the last event", all[119].OccurredAt, 20},
		{"now", time.Time{}, 20},
	}
	for _, c := range cases {
		got, read, err := flows.ReplaySnapshots(ctx, s, op.ID, c.at, 50)
		want := flows.Replay(all, c.at)
		if err != nil || got.Step != want.Step || got.Status != want.Status || got.Seq != want.Seq || !got.At.Equal(want.At) {
			t.Errorf("%s: from the snapshot %+v (%v), from the start %+v", c.name, got, err, want)
		}
		if read != c.read {
			t.Errorf("%s: read %d events, want %d (from the nearest snapshot)", c.name, read, c.read)
		}
	}
}
