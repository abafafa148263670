package sqlite

import (
	"context"
	"time"

	"changebot/store"
	"changebot/store/sqlite/internal/dbsqlc"
	"changebot/store/sqlite/internal/dbtime"
)

// ChangeEventLast implements store.EventQueries.
func (x executor) ChangeEventLast(ctx context.Context, operationID string) (int64, string, error) {
	last, err := queries.ChangeEventLast(ctx, x.ex, operationID)
	return last.Seq, last.Hash, noRows(err)
}

// ChangeEventInsert implements store.EventQueries: the payload as TEXT
// (SQLite's JSON functions refuse a BLOB).
func (x executor) ChangeEventInsert(ctx context.Context, ev store.Event) error {
	return queries.ChangeEventInsert(ctx, x.ex, &dbsqlc.ChangeEventInsertParams{OperationID: ev.OperationID,
		Seq: ev.Seq, Type: ev.Type, FromStep: ev.FromStep, ToStep: ev.ToStep, FromStatus: ev.FromStatus,
		ToStatus: ev.ToStatus, Actor: ev.Actor, Source: ev.Source, Payload: string(ev.Payload),
		SchemaVersion: ev.SchemaVersion, OccurredAt: dbtime.Of(ev.OccurredAt), PrevHash: ev.PrevHash, Hash: ev.Hash})
}

// eventOf converts a generated change_events row to the store's type.
func eventOf(r dbsqlc.ChangeEvents) store.Event {
	return store.Event{OperationID: r.OperationID, Seq: r.Seq, Type: r.Type, FromStep: r.FromStep,
		ToStep: r.ToStep, FromStatus: r.FromStatus, ToStatus: r.ToStatus, Actor: r.Actor, Source: r.Source,
		Payload: []byte(r.Payload), SchemaVersion: r.SchemaVersion, OccurredAt: r.OccurredAt.Time,
		PrevHash: r.PrevHash, Hash: r.Hash}
}

// ChangeEventList implements store.EventQueries.
func (x executor) ChangeEventList(ctx context.Context, operationID string) ([]store.Event, error) {
	rows, err := queries.ChangeEventList(ctx, x.ex, operationID)
	return convert(rows, err, eventOf)
}

// ChangeEventListAfter implements store.EventQueries.
func (x executor) ChangeEventListAfter(ctx context.Context, operationID string, after int64) ([]store.Event, error) {
	rows, err := queries.ChangeEventListAfter(ctx, x.ex, &dbsqlc.ChangeEventListAfterParams{OperationID: operationID, After: after})
	return convert(rows, err, eventOf)
}

// convert converts the generated rows of a query with f (nil for none).
func convert[R, T any](rows []R, err error, f func(R) T) ([]T, error) {
	if err != nil {
		return nil, err
	}
	var out []T
	for _, r := range rows {
		out = append(out, f(r))
	}
	return out, nil
}

// ChangeSnapshotInsert implements store.EventQueries.
func (x executor) ChangeSnapshotInsert(ctx context.Context, s store.StateSnapshot) error {
	return queries.ChangeSnapshotInsert(ctx, x.ex, &dbsqlc.ChangeSnapshotInsertParams{OperationID: s.OperationID,
		Seq: s.Seq, OccurredAt: dbtime.Of(s.OccurredAt), State: string(s.State)})
}

// ChangeSnapshotNearest implements store.EventQueries.
func (x executor) ChangeSnapshotNearest(ctx context.Context, operationID string, at time.Time) (store.StateSnapshot, error) {
	r, err := queries.ChangeSnapshotNearest(ctx, x.ex, &dbsqlc.ChangeSnapshotNearestParams{OperationID: operationID, At: dbtime.Of(at)})
	if err != nil {
		return store.StateSnapshot{}, noRows(err)
	}
	return store.StateSnapshot{OperationID: r.OperationID, Seq: r.Seq, OccurredAt: r.OccurredAt.Time, State: []byte(r.State)}, nil
}
