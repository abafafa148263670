package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// EventSchemaVersion is the version written with new events. Older versions
// are upcast on read by UpcastEvent; stored rows are never rewritten (the
// hash chain covers them as stored).
//
// Versions:
//   - 1: the first.
//   - 2: the submitted event's payload names the number of files
//     "file_count" (version 1 called it "files", the name of the submitted
//     list itself, which read as that list once the events API published
//     payloads: GET /api/v1/changes/{id}/events).
const EventSchemaVersion = 2

// Event types (persisted).
const (
	EventSubmitted  = "submitted"
	EventTransition = "transition"
	EventCommand    = "command"
	EventRefused    = "refused"
	// EventAttempt records a failed attempt of a GitLab call that the flow
	// retries on its own schedule (a reviewer robot's approve): the flow
	// counts them to bound and space its retries. It also records a call
	// GitLab refused whose follow-up read was held back (a merge or an
	// approve, actions "merge_refused" and "approve_refused"), so that the
	// retry reads instead of calling again.
	EventAttempt = "attempt"
	// EventCleanup records what the bot closed or deleted in GitLab for a
	// change that was cancelled while its create job was opening it.
	EventCleanup = "cleanup"
	// EventClaim records a claim of the commit gate before a guarded call
	// (the merge), its release when the call failed before GitLab merged,
	// or its take-over from a replica that died holding it.
	EventClaim = "claim"
	// EventDeployFailed records a deploy callback's "failed" on a MERGED
	// change: the step does not move (the next deploy that succeeds still
	// applies it), the event and the change's detail make it readable.
	EventDeployFailed = "deploy_failed"
)

// EventParams are the caller-provided fields of an event; the store fills in
// sequence, steps, statuses, time and hashes.
type EventParams struct {
	// Type is one of the Event* constants.
	Type string
	// Actor is who caused it: a GitLab username, "approval:<approver>",
	// "changebot" for the bot's own steps, "sweeper".
	Actor string
	// Source is where it came from: "api", "webhook:<delivery id>",
	// "callback:<request id>", "job:<kind>", "command:<note id>".
	Source string
	// Payload is extra detail (failure reason, pipeline id, command).
	Payload map[string]any
}

// Event is one row of change_events (DESIGN §4): an append-only,
// hash-chained record of every transition of an operation.
type Event struct {
	OperationID   string          `json:"operation_id"`
	Seq           int64           `json:"seq"`
	Type          string          `json:"type"`
	FromStep      int             `json:"from_step"`
	ToStep        int             `json:"to_step"`
	FromStatus    string          `json:"from_status"`
	ToStatus      string          `json:"to_status"`
	Actor         string          `json:"actor"`
	Source        string          `json:"source"`
	Payload       json.RawMessage `json:"payload"`
	SchemaVersion int             `json:"schema_version"`
	OccurredAt    time.Time       `json:"occurred_at"`
	PrevHash      string          `json:"prev_hash"`
	Hash          string          `json:"hash"`
}

// canonicalPayload re-encodes a JSON object with sorted keys and no
// insignificant whitespace; numbers keep their text.
func canonicalPayload(raw []byte) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decoding payload: %w", err)
	}
	return json.Marshal(v)
}

// ComputeHash returns hex(sha256(prev_hash || canonical event)), where the
// canonical event is the JSON of every field except Hash, with the payload
// canonicalised and the time in UTC RFC 3339 with microseconds.
func ComputeHash(e Event) (string, error) {
	payload, err := canonicalPayload(e.Payload)
	if err != nil {
		return "", err
	}
	canon, err := json.Marshal(struct {
		OperationID   string          `json:"operation_id"`
		Seq           int64           `json:"seq"`
		Type          string          `json:"type"`
		FromStep      int             `json:"from_step"`
		ToStep        int             `json:"to_step"`
		FromStatus    string          `json:"from_status"`
		ToStatus      string          `json:"to_status"`
		Actor         string          `json:"actor"`
		Source        string          `json:"source"`
		Payload       json.RawMessage `json:"payload"`
		SchemaVersion int             `json:"schema_version"`
		OccurredAt    string          `json:"occurred_at"`
	}{e.OperationID, e.Seq, e.Type, e.FromStep, e.ToStep, e.FromStatus, e.ToStatus, e.Actor, e.Source,
		payload, e.SchemaVersion, e.OccurredAt.UTC().Truncate(time.Microsecond).Format("2006-01-02T15:04:05.000000Z")})
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(e.PrevHash))
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// StateSnapshot is an operation's state replayed up to and including event
// Seq (a row of change_snapshots), kept every N events (setting
// history.snapshot_every) so a replay starts from the nearest one instead
// of the first event. State is the replayer's JSON (flows.ReplayState);
// snapshots are derived data: the events stay the record.
type StateSnapshot struct {
	OperationID string
	Seq         int64
	// OccurredAt is the time of event Seq.
	OccurredAt time.Time
	State      json.RawMessage
}

// History is an operation and its events read in one snapshot.
type History struct {
	Operation Operation
	// Stored are the events in sequence order exactly as stored, not
	// upcast: VerifyChain checks these; upcast them (UpcastEvent) to read
	// them.
	Stored []Event
}

// Events returns h's events upcast to the current schema version (for
// reading; the hash chain is checked on Stored).
func (h History) Events() []Event {
	out := make([]Event, len(h.Stored))
	for i, ev := range h.Stored {
		out[i] = UpcastEvent(ev)
	}
	return out
}

// upcasters lift an event of schema version v (the key) to version v+1.
var upcasters = map[int]func(Event) Event{
	1: upcastV1,
}

// upcastV1 lifts a version 1 event to version 2: a submitted event's
// "files" (a number) becomes "file_count". Other events and payloads that
// do not decode are returned unchanged.
func upcastV1(ev Event) Event {
	if ev.Type != EventSubmitted {
		return ev
	}
	dec := json.NewDecoder(bytes.NewReader(ev.Payload))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return ev
	}
	n, ok := m["files"].(json.Number)
	if !ok {
		return ev
	}
	delete(m, "files")
	m["file_count"] = n
	out, err := json.Marshal(m)
	if err != nil {
		return ev
	}
	ev.Payload = out
	return ev
}

// UpcastEvent turns an event of an older schema version into the current
// shape, one version at a time. The hash covers the stored fields, so an
// upcast event no longer verifies: VerifyChain takes stored events
// (History.Stored).
func UpcastEvent(ev Event) Event {
	for ev.SchemaVersion < EventSchemaVersion {
		if up := upcasters[ev.SchemaVersion]; up != nil {
			ev = up(ev)
		}
		ev.SchemaVersion++
	}
	return ev
}

// VerifyChain recomputes every hash of events (in sequence order, as stored:
// History.Stored) and checks the links; it returns the first broken sequence
// number, or 0 and nil.
func VerifyChain(events []Event) (int64, error) {
	prev := ""
	for i, ev := range events {
		if ev.Seq != int64(i+1) {
			return ev.Seq, fmt.Errorf("event %d: sequence gap, want %d", ev.Seq, i+1)
		}
		if ev.PrevHash != prev {
			return ev.Seq, fmt.Errorf("event %d: prev_hash does not match the previous hash", ev.Seq)
		}
		h, err := ComputeHash(ev)
		if err != nil {
			return ev.Seq, err
		}
		if h != ev.Hash {
			return ev.Seq, fmt.Errorf("event %d: hash mismatch", ev.Seq)
		}
		prev = ev.Hash
	}
	return 0, nil
}
