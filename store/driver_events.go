package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// AppendEvent appends an event that records something without moving the
// operation (a refused command, a resume), and enqueues jobs, in one
// transaction. It locks the operation row so the sequence stays gap-free;
// from/to step and status are the current ones. ErrNotFound (wrapped)
// without such an operation.
func (s *DriverStore) AppendEvent(ctx context.Context, operationID string, p EventParams, jobs ...river.InsertManyParams) (Event, error) {
	var ev Event
	err := s.inTx(ctx, func(_ Tx, x Executor) error {
		step, status, err := x.OperationStepStatusForUpdate(ctx, operationID)
		if err != nil {
			return err
		}
		if ev, err = s.appendEventSteps(ctx, x, operationID, p, step, step, status, status); err != nil {
			return err
		}
		return enqueue(ctx, x, jobs)
	})
	if err != nil {
		return Event{}, fmt.Errorf("recording %s event of %s: %w", p.Type, operationID, err)
	}
	return ev, nil
}

// appendEventSteps appends the next event of operationID in the transaction
// of x, chained to the newest one (ComputeHash). The caller holds the
// operation's lock (OperationGetForUpdate or OperationStepStatusForUpdate),
// so sequence numbers cannot race. Actor, Source and the payload are
// cleaned (CleanText, CleanValue); a nil payload is {}.
func (s *DriverStore) appendEventSteps(ctx context.Context, x Executor, operationID string, p EventParams, fromStep, toStep int, fromStatus, toStatus string) (Event, error) {
	ev := Event{OperationID: operationID, Type: p.Type, Actor: CleanText(p.Actor), Source: CleanText(p.Source),
		FromStep: fromStep, ToStep: toStep, FromStatus: fromStatus, ToStatus: toStatus,
		SchemaVersion: EventSchemaVersion, OccurredAt: s.Now()}
	if p.Payload == nil {
		p.Payload = map[string]any{}
	}
	payload, err := json.Marshal(CleanValue(p.Payload))
	if err != nil {
		return Event{}, fmt.Errorf("encoding event payload: %w", err)
	}
	ev.Payload = payload
	last, prev, err := x.ChangeEventLast(ctx, operationID)
	if errors.Is(err, ErrNotFound) {
		last, prev, err = 0, "", nil // the first event
	}
	if err != nil {
		return Event{}, fmt.Errorf("reading last event of %s: %w", operationID, err)
	}
	ev.Seq, ev.PrevHash = last+1, prev
	if ev.Hash, err = ComputeHash(ev); err != nil {
		return Event{}, err
	}
	if err := x.ChangeEventInsert(ctx, ev); err != nil {
		return Event{}, fmt.Errorf("appending event %d of %s: %w", ev.Seq, ev.OperationID, err)
	}
	return ev, nil
}

// ListEvents returns every event of operationID in sequence order, upcast to
// the current schema version (UpcastEvent): what readers of the history
// (status note, replay, history) need. Hash checks need the events as stored:
// ReadHistory.
func (s *DriverStore) ListEvents(ctx context.Context, db DBTX, operationID string) ([]Event, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	events, err := listStoredEvents(ctx, x, operationID)
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
func listStoredEvents(ctx context.Context, x Executor, operationID string) ([]Event, error) {
	events, err := x.ChangeEventList(ctx, operationID)
	if err != nil {
		return nil, fmt.Errorf("listing events of %s: %w", operationID, err)
	}
	return events, nil
}

// ReadHistory reads operation id and its events in one transaction that
// sees a single moment (Driver.ReadTx), so the two agree even while the
// operation moves (the operation and its events are written in one
// transaction). ErrNotFound (wrapped) when there is no such operation.
func (s *DriverStore) ReadHistory(ctx context.Context, id string) (History, error) {
	var h History
	err := s.d.ReadTx(ctx, func(tx Tx) error {
		x, err := s.d.Executor(tx)
		if err != nil {
			return err
		}
		if h.Operation, err = x.OperationGet(ctx, id); err != nil {
			return fmt.Errorf("reading operation %s: %w", id, err)
		}
		h.Stored, err = listStoredEvents(ctx, x, id)
		return err
	})
	if err != nil {
		return History{}, fmt.Errorf("reading history of %s: %w", id, err)
	}
	return h, nil
}

// ListEventsAfter returns the events of operationID with a sequence number
// above after, in order, upcast (a replay from a snapshot).
func (s *DriverStore) ListEventsAfter(ctx context.Context, db DBTX, operationID string, after int64) ([]Event, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	events, err := x.ChangeEventListAfter(ctx, operationID, after)
	if err != nil {
		return nil, fmt.Errorf("listing events of %s after %d: %w", operationID, after, err)
	}
	out := make([]Event, 0, len(events))
	for _, ev := range events {
		out = append(out, UpcastEvent(ev))
	}
	return out, nil
}

// PutSnapshot stores a snapshot; one already stored at its sequence number
// is kept (snapshots of one event are equal).
func (s *DriverStore) PutSnapshot(ctx context.Context, db DBTX, snap StateSnapshot) error {
	x, err := s.d.Executor(db)
	if err != nil {
		return err
	}
	if err := x.ChangeSnapshotInsert(ctx, snap); err != nil {
		return fmt.Errorf("storing the snapshot of %s at event %d: %w", snap.OperationID, snap.Seq, err)
	}
	return nil
}

// NearestSnapshot returns the operation's snapshot of the highest sequence
// number whose event happened at or before at; false when there is none.
func (s *DriverStore) NearestSnapshot(ctx context.Context, db DBTX, operationID string, at time.Time) (StateSnapshot, bool, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return StateSnapshot{}, false, err
	}
	snap, err := x.ChangeSnapshotNearest(ctx, operationID, at)
	if errors.Is(err, ErrNotFound) {
		return StateSnapshot{}, false, nil
	}
	if err != nil {
		return StateSnapshot{}, false, fmt.Errorf("reading the snapshot of %s: %w", operationID, err)
	}
	return snap, true, nil
}
