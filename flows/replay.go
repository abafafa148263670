package flows

import (
	"fmt"
	"time"

	"changebot/store"
)

// ReplayState is an operation's state rebuilt from its events alone.
type ReplayState struct {
	Step   StepCode
	Status string
	// Seq is the last event applied; 0 when no event happened by then.
	Seq int64
	At  time.Time
}

// Replay rebuilds the state of an operation from its events (in sequence
// order) as it was at `at` (DESIGN §4); a zero `at` means now. Events that
// do not move the operation (refused commands, approvals, attempts) keep
// the state.
func Replay(events []store.Event, at time.Time) ReplayState {
	var st ReplayState
	for _, ev := range events {
		if !at.IsZero() && ev.OccurredAt.After(at) {
			break
		}
		st = ReplayState{Step: StepCode(ev.ToStep), Status: ev.ToStatus, Seq: ev.Seq, At: ev.OccurredAt}
	}
	return st
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
		return fmt.Errorf("replay gives %s/%s, stored is %s/%s", st.Step, st.Status, StepCode(op.Step), op.Status)
	}
	return nil
}
