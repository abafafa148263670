package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"changebot/store"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

func (s *Store) insertEvent(ctx context.Context, tx pgx.Tx, ev store.Event) error {
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
func (s *Store) AppendEvent(ctx context.Context, operationID string, p store.EventParams, jobs ...river.InsertManyParams) (store.Event, error) {
	var ev store.Event
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var step int
		var status string
		err := tx.QueryRow(ctx, `SELECT step, status FROM operations WHERE id = $1 FOR UPDATE`, operationID).Scan(&step, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
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
		return store.Event{}, fmt.Errorf("recording %s event of %s: %w", p.Type, operationID, err)
	}
	return ev, nil
}

// appendEventSteps appends the next event of operationID in tx. The caller
// holds the operation's row lock, so sequence numbers cannot race.
func (s *Store) appendEventSteps(ctx context.Context, tx pgx.Tx, operationID string, p store.EventParams, fromStep, toStep int, fromStatus, toStatus string) (store.Event, error) {
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
	err = tx.QueryRow(ctx, `SELECT seq, hash FROM change_events WHERE operation_id = $1 ORDER BY seq DESC LIMIT 1`,
		operationID).Scan(&ev.Seq, &ev.PrevHash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return store.Event{}, fmt.Errorf("reading last event of %s: %w", operationID, err)
	}
	ev.Seq++
	if ev.Hash, err = store.ComputeHash(ev); err != nil {
		return store.Event{}, err
	}
	return ev, s.insertEvent(ctx, tx, ev)
}

// ListEvents returns every event of operationID in sequence order, upcast to
// the current schema version (UpcastEvent): what readers of the history
// (status note, replay, history) need. Hash checks need the events as stored:
// ReadHistory.
func (s *Store) ListEvents(ctx context.Context, db store.DBTX, operationID string) ([]store.Event, error) {
	events, err := listStoredEvents(ctx, db, operationID)
	if err != nil {
		return nil, err
	}
	for i := range events {
		events[i] = store.UpcastEvent(events[i])
	}
	return events, nil
}

// listStoredEvents returns every event of operationID in sequence order,
// exactly as stored (schema version and fields of its time).
func listStoredEvents(ctx context.Context, db store.DBTX, operationID string) ([]store.Event, error) {
	rows, err := q(db).Query(ctx, `SELECT operation_id, seq, type, from_step, to_step, from_status, to_status,
		actor, source, payload, schema_version, occurred_at, prev_hash, hash
		FROM change_events WHERE operation_id = $1 ORDER BY seq`, operationID)
	if err != nil {
		return nil, fmt.Errorf("listing events of %s: %w", operationID, err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var ev store.Event
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

// ReadHistory reads operation id and its events in one read-only
// REPEATABLE READ transaction, so the two agree even while the operation
// moves (the operation and its events are written in one transaction).
// ErrNotFound (wrapped) when there is no such operation.
func (s *Store) ReadHistory(ctx context.Context, id string) (store.History, error) {
	var h store.History
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if h.Operation, err = s.GetOperation(ctx, txHandle{tx}, id); err != nil {
			return err
		}
		h.Stored, err = listStoredEvents(ctx, txHandle{tx}, id)
		return err
	})
	if err != nil {
		return store.History{}, fmt.Errorf("reading history of %s: %w", id, err)
	}
	return h, nil
}
