// Package storecopy moves a changebot installation from one store to
// another (`changebot copy`, issue 11 point 6): SQLite to PostgreSQL when
// one machine is outgrown, or back. It knows no engine: the source exports
// a store.Snapshot (every table of store.CopyTables as stored, events with
// their hashes, and the unfinished jobs) and the target imports it in one
// transaction, refusing unless it is empty. Hash chains are checked on the
// snapshot before anything is written and on the target after. The
// snapshot is held in memory whole (about the size of the source's rows:
// BenchmarkCopySQLiteToPostgres copies 2,000 events in about 0.2 s), which
// suits the one-machine installations it moves.
package storecopy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"changebot/store"
)

// Source is the installation copied from.
type Source interface {
	// Export reads the whole installation in one transaction.
	Export(ctx context.Context) (*store.Snapshot, error)
}

// Target is the installation copied to: migrated and empty.
type Target interface {
	// Import writes a snapshot in one transaction, refusing a target that
	// is not empty (*store.NotEmptyError).
	Import(ctx context.Context, snap *store.Snapshot) error
	// ReadHistory reads an operation and its events as stored.
	ReadHistory(ctx context.Context, id string) (store.History, error)
}

// Report is what a copy carried.
type Report struct {
	// Counts are the rows per table (store.Snapshot.Counts).
	Counts []store.TableCount
	// Verified is how many operations' hash chains were checked on the
	// target.
	Verified int
}

// BrokenChainError is a refusal to copy: the source holds operations whose
// hash chain does not verify (changebot verify names them too).
type BrokenChainError struct {
	// Broken maps an operation id to what is wrong with its chain.
	Broken map[string]string
}

func (e *BrokenChainError) Error() string {
	ids := make([]string, 0, len(e.Broken))
	for id := range e.Broken {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return fmt.Sprintf("the source has %d operations with a broken hash chain (first %s: %s); nothing was copied",
		len(ids), ids[0], e.Broken[ids[0]])
}

// Copy reads src, checks every hash chain in what it read, writes it to dst
// in one transaction, then reads every operation back from dst and checks
// that its chain verifies and ends where the source's does. An error before
// the write leaves dst untouched; an error of the write leaves it as it was
// (one transaction); an error of the check after names the operation.
func Copy(ctx context.Context, src Source, dst Target) (Report, error) {
	snap, err := src.Export(ctx)
	if err != nil {
		return Report{}, err
	}
	chains, err := Chains(snap)
	if err != nil {
		return Report{}, err
	}
	broken := map[string]string{}
	for id, evs := range chains {
		if _, err := store.VerifyChain(evs); err != nil {
			broken[id] = err.Error()
		}
	}
	if len(broken) > 0 {
		return Report{}, &BrokenChainError{Broken: broken}
	}
	if err := dst.Import(ctx, snap); err != nil {
		return Report{}, err
	}
	rep := Report{Counts: snap.Counts()}
	if err := check(ctx, snap, chains, dst, &rep); err != nil {
		return rep, fmt.Errorf("the copy is committed on the target, but checking it failed: %w", err)
	}
	return rep, nil
}

// check reads every operation of snap back from dst and compares its chain
// with the source's (chains), counting them in rep.Verified.
func check(ctx context.Context, snap *store.Snapshot, chains map[string][]store.Event, dst Target, rep *Report) error {
	ids, err := operationIDs(snap)
	if err != nil {
		return err
	}
	for _, id := range ids {
		h, err := dst.ReadHistory(ctx, id)
		if err != nil {
			return fmt.Errorf("reading %s back: %w", id, err)
		}
		if _, err := store.VerifyChain(h.Stored); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		want := chains[id]
		if len(h.Stored) != len(want) || (len(want) > 0 && h.Stored[len(want)-1].Hash != want[len(want)-1].Hash) {
			return fmt.Errorf("%s: %d events, the source has %d (or the last hash differs)", id, len(h.Stored), len(want))
		}
		rep.Verified++
	}
	return nil
}

// column returns the index of column name in table t of store.CopyTables.
func column(table, name string) (int, error) {
	for _, t := range store.CopyTables {
		if t.Name != table {
			continue
		}
		for i, c := range t.Columns {
			if c.Name == name {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("no column %s.%s in store.CopyTables", table, name)
}

func operationIDs(snap *store.Snapshot) ([]string, error) {
	i, err := column("operations", "id")
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(snap.Rows["operations"]))
	for _, r := range snap.Rows["operations"] {
		ids = append(ids, r[i].(string))
	}
	return ids, nil
}

// Chains returns the events of snap per operation, in sequence order (the
// snapshot's order), as stored: what store.VerifyChain checks.
func Chains(snap *store.Snapshot) (map[string][]store.Event, error) {
	idx := map[string]int{}
	for _, name := range []string{"operation_id", "seq", "type", "from_step", "to_step", "from_status", "to_status",
		"actor", "source", "payload", "schema_version", "occurred_at", "prev_hash", "hash"} {
		i, err := column("change_events", name)
		if err != nil {
			return nil, err
		}
		idx[name] = i
	}
	out := map[string][]store.Event{}
	for _, r := range snap.Rows["change_events"] {
		ev, err := eventOf(r, idx)
		if err != nil {
			return nil, err
		}
		out[ev.OperationID] = append(out[ev.OperationID], ev)
	}
	ids, err := operationIDs(snap)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			out[id] = nil
		}
	}
	return out, nil
}

func eventOf(r []any, idx map[string]int) (store.Event, error) {
	ok := true
	s := func(n string) string { v, good := valueAt[string](r, idx[n]); ok = ok && good; return v }
	n := func(n string) int64 { v, good := valueAt[int64](r, idx[n]); ok = ok && good; return v }
	payload, okPayload := valueAt[[]byte](r, idx["payload"])
	at, okAt := valueAt[time.Time](r, idx["occurred_at"])
	ev := store.Event{OperationID: s("operation_id"), Seq: n("seq"), Type: s("type"),
		FromStep: int(n("from_step")), ToStep: int(n("to_step")), FromStatus: s("from_status"), ToStatus: s("to_status"),
		Actor: s("actor"), Source: s("source"), Payload: json.RawMessage(payload),
		SchemaVersion: int(n("schema_version")), OccurredAt: at,
		PrevHash: s("prev_hash"), Hash: s("hash")}
	if !ok || !okPayload || !okAt {
		return store.Event{}, errors.New("an event row of the snapshot has a value of the wrong type")
	}
	return ev, nil
}

// valueAt returns r[i] as a V; false when r has no column i or it holds
// another type.
func valueAt[V any](r []any, i int) (V, bool) {
	var zero V
	if i < 0 || i >= len(r) {
		return zero, false
	}
	v, ok := r[i].(V)
	return v, ok
}
