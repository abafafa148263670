package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

func (s *Store) insertEvent(ctx context.Context, tx pgx.Tx, ev store.Event) error {
	err := queries.ChangeEventInsert(ctx, tx, &dbsqlc.ChangeEventInsertParams{OperationID: ev.OperationID, Seq: ev.Seq,
		Type: ev.Type, FromStep: ev.FromStep, ToStep: ev.ToStep, FromStatus: ev.FromStatus, ToStatus: ev.ToStatus,
		Actor: ev.Actor, Source: ev.Source, Payload: []byte(ev.Payload), SchemaVersion: ev.SchemaVersion,
		OccurredAt: ev.OccurredAt, PrevHash: ev.PrevHash, Hash: ev.Hash})
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
		cur, err := queries.OperationStepStatusForUpdate(ctx, tx, operationID)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		ev, err = s.appendEventSteps(ctx, tx, operationID, p, cur.Step, cur.Step, cur.Status, cur.Status)
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
	last, err := queries.ChangeEventLast(ctx, tx, operationID)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return store.Event{}, fmt.Errorf("reading last event of %s: %w", operationID, err)
	}
	ev.Seq, ev.PrevHash = last.Seq, last.Hash
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
	rows, err := queries.ChangeEventList(ctx, q(db), operationID)
	if err != nil {
		return nil, fmt.Errorf("listing events of %s: %w", operationID, err)
	}
	var out []store.Event
	for _, r := range rows {
		out = append(out, store.Event{OperationID: r.OperationID, Seq: r.Seq, Type: r.Type, FromStep: r.FromStep,
			ToStep: r.ToStep, FromStatus: r.FromStatus, ToStatus: r.ToStatus, Actor: r.Actor, Source: r.Source,
			Payload: r.Payload, SchemaVersion: r.SchemaVersion, OccurredAt: r.OccurredAt.UTC(),
			PrevHash: r.PrevHash, Hash: r.Hash})
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

// ListEventsAfter implements store.Events.
func (s *Store) ListEventsAfter(ctx context.Context, db store.DBTX, operationID string, after int64) ([]store.Event, error) {
	rows, err := queries.ChangeEventListAfter(ctx, q(db), &dbsqlc.ChangeEventListAfterParams{OperationID: operationID, After: after})
	if err != nil {
		return nil, fmt.Errorf("listing events of %s after %d: %w", operationID, after, err)
	}
	out := make([]store.Event, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.UpcastEvent(store.Event{OperationID: r.OperationID, Seq: r.Seq, Type: r.Type,
			FromStep: r.FromStep, ToStep: r.ToStep, FromStatus: r.FromStatus, ToStatus: r.ToStatus, Actor: r.Actor,
			Source: r.Source, Payload: r.Payload, SchemaVersion: r.SchemaVersion, OccurredAt: r.OccurredAt.UTC(),
			PrevHash: r.PrevHash, Hash: r.Hash}))
	}
	return out, nil
}

// PutSnapshot implements store.Events.
func (s *Store) PutSnapshot(ctx context.Context, db store.DBTX, snap store.StateSnapshot) error {
	err := queries.ChangeSnapshotInsert(ctx, q(db), &dbsqlc.ChangeSnapshotInsertParams{OperationID: snap.OperationID,
		Seq: snap.Seq, OccurredAt: snap.OccurredAt, State: []byte(snap.State)})
	if err != nil {
		return fmt.Errorf("storing the snapshot of %s at event %d: %w", snap.OperationID, snap.Seq, err)
	}
	return nil
}

// NearestSnapshot implements store.Events.
func (s *Store) NearestSnapshot(ctx context.Context, db store.DBTX, operationID string, at time.Time) (store.StateSnapshot, bool, error) {
	r, err := queries.ChangeSnapshotNearest(ctx, q(db), &dbsqlc.ChangeSnapshotNearestParams{OperationID: operationID, At: at})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.StateSnapshot{}, false, nil
	}
	if err != nil {
		return store.StateSnapshot{}, false, fmt.Errorf("reading the snapshot of %s: %w", operationID, err)
	}
	return store.StateSnapshot{OperationID: r.OperationID, Seq: r.Seq, OccurredAt: r.OccurredAt.UTC(), State: r.State}, true, nil
}
