package routing

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"changebot/commands"
	"changebot/store"
)

// queueEngine is the engine's merge queue freeze over one queue, for the
// command adapter; the rest of Engine is not called.
type queueEngine struct {
	Engine
	q     store.Queue
	calls []string
}

func (e *queueEngine) FreezeQueue(_ context.Context, projectID int64, branch string, frozen bool, actor, reason string) (store.Queue, error) {
	e.calls = append(e.calls, fmt.Sprintf("%d:%s frozen=%v by %s: %s", projectID, branch, frozen, actor, reason))
	e.q.Key = store.QueueKey{ProjectID: projectID, TargetBranch: branch}
	switch {
	case frozen && e.q.Frozen():
	case frozen:
		e.q.FrozenAt, e.q.FrozenBy, e.q.FrozenReason = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), actor, reason
	default:
		e.q.FrozenAt, e.q.FrozenBy, e.q.FrozenReason = time.Time{}, "", ""
	}
	return e.q, nil
}

// oneOperation reads one operation by id.
type oneOperation struct{ op store.Operation }

func (oneOperation) DB() store.DBTX { return nil }

func (o oneOperation) GetOperation(_ context.Context, _ store.DBTX, id string) (store.Operation, error) {
	if id != o.op.ID {
		return store.Operation{}, store.ErrNotFound
	}
	return o.op, nil
}

// TestCommandFlowFreezesTheChangesQueue: /freeze and /unfreeze act on the
// merge queue of the change's own project and target branch, read from
// the stored change, and answer the queue's freeze as it is then (the
// first freeze stays).
func TestCommandFlowFreezesTheChangesQueue(t *testing.T) {
	t.Parallel()
	e := &queueEngine{}
	f := NewCommandFlow(e, oneOperation{store.Operation{ID: "op_1", ProjectID: 101, TargetBranch: "release/1.0"}})
	ctx := t.Context()
	got, err := f.FreezeQueue(ctx, "op_1", true, "olivia", "release freeze")
	if want := (commands.QueueState{Branch: "release/1.0", Frozen: true, FrozenBy: "olivia", FrozenReason: "release freeze"}); err != nil || got != want {
		t.Errorf("freeze = %+v, %v; want %+v", got, err, want)
	}
	if got, _ := f.FreezeQueue(ctx, "op_1", true, "ops", "again"); got.FrozenBy != "olivia" {
		t.Errorf("freezing again = %+v, want olivia's freeze kept", got)
	}
	if got, err := f.FreezeQueue(ctx, "op_1", false, "ops", ""); err != nil || got.Frozen || got.Branch != "release/1.0" {
		t.Errorf("unfreeze = %+v, %v; want release/1.0 unfrozen", got, err)
	}
	want := []string{"101:release/1.0 frozen=true by olivia: release freeze", "101:release/1.0 frozen=true by ops: again", "101:release/1.0 frozen=false by ops: "}
	if !reflect.DeepEqual(e.calls, want) {
		t.Errorf("calls %q, want %q", e.calls, want)
	}
	if _, err := f.FreezeQueue(ctx, "op_2", true, "ops", "x"); !errors.Is(err, store.ErrNotFound) || len(e.calls) != 3 {
		t.Errorf("an unknown change: %v after %d calls, want store.ErrNotFound and no freeze", err, len(e.calls))
	}
}
