package flows

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"changebot/flows/rules"
	"changebot/store"
)

// ReplayState is an operation's state rebuilt from its events alone.
// Its JSON is the state of a snapshot (store.StateSnapshot).
type ReplayState struct {
	Step   rules.StepCode `json:"step"`
	Status string         `json:"status"`
	// Seq is the last event applied; 0 when no event happened by then.
	Seq int64 `json:"seq"`
	// At is the time of event Seq.
	At time.Time `json:"at"`
}

// Replay rebuilds the state of an operation from its events (in sequence
// order) as it was at `at` (DESIGN §4); a zero `at` means now. Events that
// do not move the operation (refused commands, approvals, attempts) keep
// the state.
func Replay(events []store.Event, at time.Time) ReplayState {
	return replayFrom(ReplayState{}, events, at, nil)
}

// replayFrom applies events (those after st.Seq, in order) to st up to
// `at` (zero: all), calling each, when not nil, with the state after every
// event applied.
func replayFrom(st ReplayState, events []store.Event, at time.Time, each func(ReplayState)) ReplayState {
	for _, ev := range events {
		if ev.Seq <= st.Seq {
			continue
		}
		if !at.IsZero() && ev.OccurredAt.After(at) {
			break
		}
		st = ReplayState{Step: rules.StepCode(ev.ToStep), Status: ev.ToStatus, Seq: ev.Seq, At: ev.OccurredAt}
		if each != nil {
			each(st)
		}
	}
	return st
}

// SnapshotStore is what ReplaySnapshots reads and writes (store.Events).
type SnapshotStore interface {
	DB() store.DBTX
	NearestSnapshot(ctx context.Context, db store.DBTX, operationID string, at time.Time) (store.StateSnapshot, bool, error)
	ListEventsAfter(ctx context.Context, db store.DBTX, operationID string, after int64) ([]store.Event, error)
	PutSnapshot(ctx context.Context, db store.DBTX, s store.StateSnapshot) error
}

// ReplaySnapshots rebuilds the state of operation id at `at` (zero: now)
// like Replay, starting from its nearest snapshot taken at or before `at`
// and reading only the events after it; on the way it stores a snapshot
// at every event whose sequence number is a multiple of every (the setting
// history.snapshot_every; below 1, none), so the next replay starts
// later. It also returns how many events it read. A snapshot whose state
// does not decode is ignored (replay from the first event).
func ReplaySnapshots(ctx context.Context, st SnapshotStore, id string, at time.Time, every int) (ReplayState, int, error) {
	upTo := at
	if upTo.IsZero() {
		upTo = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	var start ReplayState
	snap, ok, err := st.NearestSnapshot(ctx, st.DB(), id, upTo)
	if err != nil {
		return ReplayState{}, 0, err
	}
	if ok && json.Unmarshal(snap.State, &start) != nil {
		start = ReplayState{}
	}
	events, err := st.ListEventsAfter(ctx, st.DB(), id, start.Seq)
	if err != nil {
		return ReplayState{}, 0, err
	}
	var putErr error
	out := replayFrom(start, events, at, func(s ReplayState) {
		if every < 1 || s.Seq%int64(every) != 0 || putErr != nil {
			return
		}
		state, err := json.Marshal(s)
		if err != nil {
			putErr = err
			return
		}
		putErr = st.PutSnapshot(ctx, st.DB(), store.StateSnapshot{OperationID: id, Seq: s.Seq, OccurredAt: s.At, State: state})
	})
	if putErr != nil {
		return ReplayState{}, len(events), fmt.Errorf("replaying %s: %w", id, putErr)
	}
	return out, len(events), nil
}

// Verify checks an operation's history read in one snapshot
// (store.ReadHistory): the hash chain of the events as stored is intact,
// and replaying them, upcast, gives the stored step and status.
func Verify(h store.History) error {
	if seq, err := store.VerifyChain(h.Stored); err != nil {
		return fmt.Errorf("hash chain broken at event %d: %w", seq, err)
	}
	st := Replay(h.Events(), time.Time{})
	if op := h.Operation; int(st.Step) != op.Step || st.Status != op.Status {
		return fmt.Errorf("replay gives %s/%s, stored is %s/%s", st.Step, st.Status, rules.StepCode(op.Step), op.Status)
	}
	return nil
}
