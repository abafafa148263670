package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/riverqueue/river"

	"changebot/store"
)

// AppendEvent implements store.Events.
func (s *Store) AppendEvent(ctx context.Context, operationID string, p store.EventParams, jobs ...river.InsertManyParams) (store.Event, error) {
	var ev store.Event
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		c := conn{ex: tx}
		var step int
		var status string
		err := c.QueryRow(ctx, `SELECT step, status FROM operations WHERE id = ?`, operationID).Scan(&step, &status)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if ev, err = s.appendEventSteps(ctx, c, operationID, p, step, step, status, status); err != nil {
			return err
		}
		return s.enqueue(ctx, tx, jobs)
	})
	if err != nil {
		return store.Event{}, fmt.Errorf("recording %s event of %s: %w", p.Type, operationID, err)
	}
	return ev, nil
}

// appendEventSteps appends the next event of operationID in the
// transaction of c, which holds the write lock: sequence numbers cannot race.
func (s *Store) appendEventSteps(ctx context.Context, c conn, operationID string, p store.EventParams, fromStep, toStep int, fromStatus, toStatus string) (store.Event, error) {
	ev := store.Event{OperationID: operationID, Type: p.Type, Actor: store.CleanText(p.Actor), Source: store.CleanText(p.Source),
		FromStep: fromStep, ToStep: toStep, FromStatus: fromStatus, ToStatus: toStatus,
		SchemaVersion: store.EventSchemaVersion, OccurredAt: s.Now()}
	if p.Payload == nil {
		p.Payload = map[string]any{}
	}
	payload, err := json.Marshal(store.CleanValue(p.Payload))
	if err != nil {
		return store.Event{}, fmt.Errorf("encoding event payload: %w", err)
	}
	ev.Payload = payload
	err = c.QueryRow(ctx, `SELECT seq, hash FROM change_events WHERE operation_id = ? ORDER BY seq DESC LIMIT 1`,
		operationID).Scan(&ev.Seq, &ev.PrevHash)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return store.Event{}, fmt.Errorf("reading last event of %s: %w", operationID, err)
	}
	ev.Seq++
	if ev.Hash, err = store.ComputeHash(ev); err != nil {
		return store.Event{}, err
	}
	_, err = c.Exec(ctx, `INSERT INTO change_events (operation_id, seq, type, from_step, to_step,
		from_status, to_status, actor, source, payload, schema_version, occurred_at, prev_hash, hash)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		ev.OperationID, ev.Seq, ev.Type, ev.FromStep, ev.ToStep, ev.FromStatus, ev.ToStatus, ev.Actor,
		ev.Source, string(ev.Payload), ev.SchemaVersion, ev.OccurredAt, ev.PrevHash, ev.Hash)
	if err != nil {
		return store.Event{}, fmt.Errorf("appending event %d of %s: %w", ev.Seq, ev.OperationID, err)
	}
	return ev, nil
}

// ListEvents implements store.Events.
func (s *Store) ListEvents(ctx context.Context, db store.DBTX, operationID string) ([]store.Event, error) {
	events, err := listStoredEvents(ctx, q(db), operationID)
	if err != nil {
		return nil, err
	}
	for i := range events {
		events[i] = store.UpcastEvent(events[i])
	}
	return events, nil
}

func listStoredEvents(ctx context.Context, c conn, operationID string) ([]store.Event, error) {
	rows, err := c.Query(ctx, `SELECT operation_id, seq, type, from_step, to_step, from_status, to_status,
		actor, source, payload, schema_version, occurred_at, prev_hash, hash
		FROM change_events WHERE operation_id = ? ORDER BY seq`, operationID)
	if err != nil {
		return nil, fmt.Errorf("listing events of %s: %w", operationID, err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var ev store.Event
		var payload []byte
		if err := rows.Scan(&ev.OperationID, &ev.Seq, &ev.Type, &ev.FromStep, &ev.ToStep, &ev.FromStatus,
			&ev.ToStatus, &ev.Actor, &ev.Source, &payload, &ev.SchemaVersion, tm{&ev.OccurredAt},
			&ev.PrevHash, &ev.Hash); err != nil {
			return nil, fmt.Errorf("reading event of %s: %w", operationID, err)
		}
		ev.Payload = payload
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing events of %s: %w", operationID, err)
	}
	return out, nil
}

// ReadHistory implements store.Events: one transaction, so the operation
// and its events agree.
func (s *Store) ReadHistory(ctx context.Context, id string) (store.History, error) {
	var h store.History
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if h.Operation, err = s.GetOperation(ctx, txHandle{tx}, id); err != nil {
			return err
		}
		h.Stored, err = listStoredEvents(ctx, conn{ex: tx}, id)
		return err
	})
	if err != nil {
		return store.History{}, fmt.Errorf("reading history of %s: %w", id, err)
	}
	return h, nil
}
