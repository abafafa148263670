package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// EventSchemaVersion is the version written with new events. Older versions
// are upcast on read by UpcastEvent.
const EventSchemaVersion = 1

// Event types (persisted).
const (
	EventSubmitted  = "submitted"
	EventTransition = "transition"
	EventCommand    = "command"
	EventRefused    = "refused"
	// EventAttempt records a failed attempt of a GitLab call that the flow
	// retries on its own schedule (a reviewer robot's approve): the flow
	// counts them to bound and space its retries.
	EventAttempt = "attempt"
	// EventCleanup records what the bot closed or deleted in GitLab for a
	// change that was cancelled while its create job was opening it.
	EventCleanup = "cleanup"
	// EventClaim records a claim of the commit gate before a guarded call
	// (the merge), its release when the call failed before GitLab merged,
	// or its take-over from a replica that died holding it.
	EventClaim = "claim"
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

func (s *Store) insertEvent(ctx context.Context, tx pgx.Tx, ev Event) error {
	_, err := tx.Exec(ctx, `INSERT INTO change_events (operation_id, seq, type, from_step, to_step,
		from_status, to_status, actor, source, payload, schema_version, occurred_at, prev_hash, hash)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14)`,
		ev.OperationID, ev.Seq, ev.Type, ev.FromStep, ev.ToStep, ev.FromStatus, ev.ToStatus, ev.Actor,
		ev.Source, []byte(ev.Payload), ev.SchemaVersion, ev.OccurredAt, ev.PrevHash, ev.Hash)
	if err != nil {
		return fmt.Errorf("appending event %d of %s: %w", ev.Seq, ev.OperationID, err)
	}
	return nil
}

// AppendEvent appends an event that records something without moving the
// operation (a refused command, a resume), and enqueues jobs, in one
// transaction. It locks the operation row so the sequence stays gap-free;
// from/to step and status are the current ones.
func (s *Store) AppendEvent(ctx context.Context, operationID string, p EventParams, jobs ...river.InsertManyParams) (Event, error) {
	var ev Event
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var step int
		var status string
		err := tx.QueryRow(ctx, `SELECT step, status FROM operations WHERE id = $1 FOR UPDATE`, operationID).Scan(&step, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		ev, err = s.appendEventSteps(ctx, tx, operationID, p, step, step, status, status)
		if err != nil {
			return err
		}
		return s.enqueue(ctx, tx, jobs)
	})
	if err != nil {
		return Event{}, fmt.Errorf("recording %s event of %s: %w", p.Type, operationID, err)
	}
	return ev, nil
}

// appendEventSteps appends the next event of operationID in tx. The caller
// holds the operation's row lock, so sequence numbers cannot race.
func (s *Store) appendEventSteps(ctx context.Context, tx pgx.Tx, operationID string, p EventParams, fromStep, toStep int, fromStatus, toStatus string) (Event, error) {
	ev := Event{OperationID: operationID, Type: p.Type, Actor: cleanText(p.Actor), Source: cleanText(p.Source),
		FromStep: fromStep, ToStep: toStep, FromStatus: fromStatus, ToStatus: toStatus,
		SchemaVersion: EventSchemaVersion, OccurredAt: s.Now()}
	if p.Payload == nil {
		p.Payload = map[string]any{}
	}
	payload, err := json.Marshal(cleanValue(p.Payload))
	if err != nil {
		return Event{}, fmt.Errorf("encoding event payload: %w", err)
	}
	ev.Payload = payload
	err = tx.QueryRow(ctx, `SELECT seq, hash FROM change_events WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1`,
		operationID).Scan(&ev.Seq, &ev.PrevHash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Event{}, fmt.Errorf("reading last event of %s: %w", operationID, err)
	}
	ev.Seq++
	if ev.Hash, err = ComputeHash(ev); err != nil {
		return Event{}, err
	}
	return ev, s.insertEvent(ctx, tx, ev)
}

// ListEvents returns every event of operationID in sequence order, upcast to
// the current schema version (UpcastEvent): what readers of the history
// (status note, replay, history) need. Hash checks need the events as stored:
// ReadHistory.
func (s *Store) ListEvents(ctx context.Context, db DBTX, operationID string) ([]Event, error) {
	events, err := listStoredEvents(ctx, db, operationID)
	if err != nil {
		return nil, err
	}
	for i := range events {
		events[i] = UpcastEvent(events[i])
	}
	return events, nil
}

// listStoredEvents returns every event of operationID in sequence order,
// exactly as stored (schema version and fields of its time).
func listStoredEvents(ctx context.Context, db DBTX, operationID string) ([]Event, error) {
	rows, err := q(db).Query(ctx, `SELECT operation_id, seq, type, from_step, to_step, from_status, to_status,
		actor, source, payload, schema_version, occurred_at, prev_hash, hash
		FROM change_events WHERE operation_id = $1 ORDER BY seq`, operationID)
	if err != nil {
		return nil, fmt.Errorf("listing events of %s: %w", operationID, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var ev Event
		var payload []byte
		if err := rows.Scan(&ev.OperationID, &ev.Seq, &ev.Type, &ev.FromStep, &ev.ToStep, &ev.FromStatus,
			&ev.ToStatus, &ev.Actor, &ev.Source, &payload, &ev.SchemaVersion, &ev.OccurredAt,
			&ev.PrevHash, &ev.Hash); err != nil {
			return nil, fmt.Errorf("reading event of %s: %w", operationID, err)
		}
		ev.Payload = payload
		ev.OccurredAt = ev.OccurredAt.UTC()
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing events of %s: %w", operationID, err)
	}
	return out, nil
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

// ReadHistory reads operation id and its events in one read-only
// REPEATABLE READ transaction, so the two agree even while the operation
// moves (the operation and its events are written in one transaction).
// ErrNotFound (wrapped) when there is no such operation.
func (s *Store) ReadHistory(ctx context.Context, id string) (History, error) {
	var h History
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if h.Operation, err = s.GetOperation(ctx, txHandle{tx}, id); err != nil {
			return err
		}
		h.Stored, err = listStoredEvents(ctx, txHandle{tx}, id)
		return err
	})
	if err != nil {
		return History{}, fmt.Errorf("reading history of %s: %w", id, err)
	}
	return h, nil
}

// upcasters lift an event of schema version v (the key) to version v+1.
// None yet: version 1 is the only version so far.
var upcasters = map[int]func(Event) Event{}

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
