package storecopy

import (
	"testing"
	"time"
)

// TestEventOf: an event row of a snapshot reads into a store.Event; a row
// with a value of another type, or too few columns, is an error, never a
// panic.
func TestEventOf(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cols := []string{"operation_id", "seq", "type", "from_step", "to_step", "from_status", "to_status",
		"actor", "source", "payload", "schema_version", "occurred_at", "prev_hash", "hash"}
	idx := map[string]int{}
	for i, c := range cols {
		idx[c] = i
	}
	row := func(change func(r []any) []any) []any {
		r := []any{"op_1", int64(3), "transition", int64(10), int64(11), "", "", "robot", "job:create_mr",
			[]byte(`{}`), int64(1), at, "h2", "h3"}
		if change != nil {
			r = change(r)
		}
		return r
	}
	tests := []struct {
		name    string
		row     []any
		wantErr bool
	}{
		{name: "valid", row: row(nil)},
		{name: "seq a string", row: row(func(r []any) []any { r[1] = "3"; return r }), wantErr: true},
		{name: "payload missing", row: row(func(r []any) []any { r[9] = nil; return r }), wantErr: true},
		{name: "occurred_at a string", row: row(func(r []any) []any { r[11] = at.String(); return r }), wantErr: true},
		{name: "too few columns", row: row(func(r []any) []any { return r[:5] }), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, err := eventOf(tc.row, idx)
			if (err != nil) != tc.wantErr {
				t.Fatalf("eventOf answered %+v, %v; want an error: %v", ev, err, tc.wantErr)
			}
			if !tc.wantErr && (ev.OperationID != "op_1" || ev.Seq != 3 || ev.ToStep != 11 || string(ev.Payload) != "{}" ||
				!ev.OccurredAt.Equal(at) || ev.Hash != "h3") {
				t.Errorf("eventOf read %+v", ev)
			}
		})
	}
}
