package postgres

import (
	"context"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"
)

// ChangeEventLast implements store.EventQueries.
func (x executor) ChangeEventLast(ctx context.Context, operationID string) (int64, string, error) {
	last, err := queries.ChangeEventLast(ctx, x.q, operationID)
	return last.Seq, last.Hash, noRows(err)
}

// ChangeEventInsert implements store.EventQueries.
func (x executor) ChangeEventInsert(ctx context.Context, ev store.Event) error {
	return queries.ChangeEventInsert(ctx, x.q, &dbsqlc.ChangeEventInsertParams{OperationID: ev.OperationID, Seq: ev.Seq,
		Type: ev.Type, FromStep: ev.FromStep, ToStep: ev.ToStep, FromStatus: ev.FromStatus, ToStatus: ev.ToStatus,
		Actor: ev.Actor, Source: ev.Source, Payload: []byte(ev.Payload), SchemaVersion: ev.SchemaVersion,
		OccurredAt: ev.OccurredAt, PrevHash: ev.PrevHash, Hash: ev.Hash})
}

// events converts generated change_events rows to the store's type.
func events(rows []dbsqlc.ChangeEvents, err error) ([]store.Event, error) {
	if err != nil {
		return nil, err
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

// ChangeEventList implements store.EventQueries.
func (x executor) ChangeEventList(ctx context.Context, operationID string) ([]store.Event, error) {
	return events(queries.ChangeEventList(ctx, x.q, operationID))
}

// ChangeEventListAfter implements store.EventQueries.
func (x executor) ChangeEventListAfter(ctx context.Context, operationID string, after int64) ([]store.Event, error) {
	return events(queries.ChangeEventListAfter(ctx, x.q, &dbsqlc.ChangeEventListAfterParams{OperationID: operationID, After: after}))
}

// ChangeSnapshotInsert implements store.EventQueries.
func (x executor) ChangeSnapshotInsert(ctx context.Context, s store.StateSnapshot) error {
	return queries.ChangeSnapshotInsert(ctx, x.q, &dbsqlc.ChangeSnapshotInsertParams{OperationID: s.OperationID,
		Seq: s.Seq, OccurredAt: s.OccurredAt, State: []byte(s.State)})
}

// ChangeSnapshotNearest implements store.EventQueries.
func (x executor) ChangeSnapshotNearest(ctx context.Context, operationID string, at time.Time) (store.StateSnapshot, error) {
	r, err := queries.ChangeSnapshotNearest(ctx, x.q, &dbsqlc.ChangeSnapshotNearestParams{OperationID: operationID, At: at})
	if err != nil {
		return store.StateSnapshot{}, noRows(err)
	}
	return store.StateSnapshot{OperationID: r.OperationID, Seq: r.Seq, OccurredAt: r.OccurredAt.UTC(), State: r.State}, nil
}
