package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"changebot/store"
	"changebot/store/sqlite/internal/dbsqlc"
	"changebot/store/sqlite/internal/dbtime"
)

// AppendEvent implements store.Events.
func (s *Store) AppendEvent(ctx context.Context, operationID string, p store.EventParams, jobs ...river.InsertManyParams) (store.Event, error) {
	var ev store.Event
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		cur, err := queries.OperationStepStatus(ctx, tx, operationID)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if ev, err = s.appendEventSteps(ctx, tx, operationID, p, cur.Step, cur.Step, cur.Status, cur.Status); err != nil {
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
func (s *Store) appendEventSteps(ctx context.Context, tx *sql.Tx, operationID string, p store.EventParams, fromStep, toStep int, fromStatus, toStatus string) (store.Event, error) {
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
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return store.Event{}, fmt.Errorf("reading last event of %s: %w", operationID, err)
	}
	ev.Seq, ev.PrevHash = last.Seq, last.Hash
	ev.Seq++
	if ev.Hash, err = store.ComputeHash(ev); err != nil {
		return store.Event{}, err
	}
	err = queries.ChangeEventInsert(ctx, tx, &dbsqlc.ChangeEventInsertParams{OperationID: ev.OperationID, Seq: ev.Seq,
		Type: ev.Type, FromStep: ev.FromStep, ToStep: ev.ToStep, FromStatus: ev.FromStatus, ToStatus: ev.ToStatus,
		Actor: ev.Actor, Source: ev.Source, Payload: string(ev.Payload), SchemaVersion: ev.SchemaVersion,
		OccurredAt: dbtime.Of(ev.OccurredAt), PrevHash: ev.PrevHash, Hash: ev.Hash})
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
	g, err := c.gen()
	if err != nil {
		return nil, err
	}
	rows, err := queries.ChangeEventList(ctx, g, operationID)
	if err != nil {
		return nil, fmt.Errorf("listing events of %s: %w", operationID, err)
	}
	var out []store.Event
	for _, r := range rows {
		out = append(out, store.Event{OperationID: r.OperationID, Seq: r.Seq, Type: r.Type, FromStep: r.FromStep,
			ToStep: r.ToStep, FromStatus: r.FromStatus, ToStatus: r.ToStatus, Actor: r.Actor, Source: r.Source,
			Payload: []byte(r.Payload), SchemaVersion: r.SchemaVersion, OccurredAt: r.OccurredAt.Time,
			PrevHash: r.PrevHash, Hash: r.Hash})
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

// ListEventsAfter implements store.Events.
func (s *Store) ListEventsAfter(ctx context.Context, db store.DBTX, operationID string, after int64) ([]store.Event, error) {
	g, err := q(db).gen()
	if err != nil {
		return nil, err
	}
	rows, err := queries.ChangeEventListAfter(ctx, g, &dbsqlc.ChangeEventListAfterParams{OperationID: operationID, After: after})
	if err != nil {
		return nil, fmt.Errorf("listing events of %s after %d: %w", operationID, after, err)
	}
	out := make([]store.Event, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.UpcastEvent(store.Event{OperationID: r.OperationID, Seq: r.Seq, Type: r.Type,
			FromStep: r.FromStep, ToStep: r.ToStep, FromStatus: r.FromStatus, ToStatus: r.ToStatus, Actor: r.Actor,
			Source: r.Source, Payload: []byte(r.Payload), SchemaVersion: r.SchemaVersion, OccurredAt: r.OccurredAt.Time,
			PrevHash: r.PrevHash, Hash: r.Hash}))
	}
	return out, nil
}

// PutSnapshot implements store.Events.
func (s *Store) PutSnapshot(ctx context.Context, db store.DBTX, snap store.StateSnapshot) error {
	g, err := q(db).gen()
	if err != nil {
		return err
	}
	err = queries.ChangeSnapshotInsert(ctx, g, &dbsqlc.ChangeSnapshotInsertParams{OperationID: snap.OperationID,
		Seq: snap.Seq, OccurredAt: dbtime.Of(snap.OccurredAt), State: string(snap.State)})
	if err != nil {
		return fmt.Errorf("storing the snapshot of %s at event %d: %w", snap.OperationID, snap.Seq, err)
	}
	return nil
}

// NearestSnapshot implements store.Events.
func (s *Store) NearestSnapshot(ctx context.Context, db store.DBTX, operationID string, at time.Time) (store.StateSnapshot, bool, error) {
	g, err := q(db).gen()
	if err != nil {
		return store.StateSnapshot{}, false, err
	}
	r, err := queries.ChangeSnapshotNearest(ctx, g, &dbsqlc.ChangeSnapshotNearestParams{OperationID: operationID, At: dbtime.Of(at)})
	if errors.Is(err, sql.ErrNoRows) {
		return store.StateSnapshot{}, false, nil
	}
	if err != nil {
		return store.StateSnapshot{}, false, fmt.Errorf("reading the snapshot of %s: %w", operationID, err)
	}
	return store.StateSnapshot{OperationID: r.OperationID, Seq: r.Seq, OccurredAt: r.OccurredAt.Time, State: []byte(r.State)}, true, nil
}
