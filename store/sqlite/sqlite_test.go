package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"changebot/store"
	"changebot/store/sqlite"
	"changebot/store/storetest"
)

func newStore(t *testing.T) *sqlite.Store {
	t.Helper()
	return open(t)(storetest.Opts{}).(*sqlite.Store)
}

// TestMigrateIsReversible: migrating twice is a no-op and leaves the
// newest version; down removes changebot's and River's tables; up again
// restores them.
func TestMigrateIsReversible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sqlite.OpenDB(filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables := func() int {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table'
			AND name IN ('operations', 'bindings', 'change_events', 'commit_claims', 'river_job')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 2 {
		if err := sqlite.Migrate(ctx, db, nil); err != nil {
			t.Fatalf("up: %v", err)
		}
	}
	if v, cur, err := sqlite.MigrationStatus(db); err != nil || !cur || v != sqlite.LatestMigration {
		t.Fatalf("status after up: v=%d current=%v err=%v", v, cur, err)
	}
	if n := tables(); n != 5 {
		t.Fatalf("tables after up: %d, want 5", n)
	}
	if err := sqlite.Migrate(ctx, db, &sqlite.MigrateOpts{Down: true}); err != nil {
		t.Fatalf("down: %v", err)
	}
	if n := tables(); n != 0 {
		t.Fatalf("tables left after down: %d", n)
	}
	if err := sqlite.Migrate(ctx, db, nil); err != nil {
		t.Fatalf("up again: %v", err)
	}
}

// stepArgs is a stand-in step job: its args name the operation and step
// as the flows' step jobs do.
type stepArgs struct {
	OperationID string `json:"operation_id"`
	Step        int    `json:"step"`
}

func (stepArgs) Kind() string { return "test_step" }

// TestStepJobsFoundByTheirArgs: the queries over River's job table find a
// step's job by the operation and step in its args (River's SQLite driver
// stores args as JSONB): ResumeStep does not enqueue beside a live job,
// RetireStepJobs deletes it, and then ResumeStep enqueues.
func TestStepJobsFoundByTheirArgs(t *testing.T) {
	t.Parallel()
	s := open(t)(storetest.Opts{})
	ctx := context.Background()
	op, _, err := s.CreateOperation(ctx, store.CreateParams{
		Operation: store.Operation{ID: "op_1", SubjectID: "svc", TargetKey: "prod", Project: "g/r", Title: "t",
			RequestedBy: "alice", Step: 10401, Status: store.StatusApprovalSending},
		Event: store.EventParams{Type: store.EventSubmitted},
		Jobs: []river.InsertManyParams{{Args: stepArgs{OperationID: "op_1", Step: 10401},
			InsertOpts: &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)}}}})
	if err != nil {
		t.Fatal(err)
	}
	resume := func() bool {
		t.Helper()
		queued, err := s.ResumeStep(ctx, store.ResumeStepParams{OperationID: op.ID, Step: op.Step, Kinds: []string{"test_step"},
			Event: store.EventParams{Type: store.EventCommand},
			Jobs:  []river.InsertManyParams{{Args: stepArgs{OperationID: "op_1", Step: 10401}}}})
		if err != nil {
			t.Fatal(err)
		}
		return queued
	}
	if resume() {
		t.Fatal("resume enqueued beside the live job")
	}
	if n, err := s.RetireStepJobs(ctx, s.DB(), op.ID, op.Step, []string{"test_step"}); err != nil || n != 1 {
		t.Fatalf("retired %d jobs (%v), want 1", n, err)
	}
	if !resume() {
		t.Fatal("resume did not enqueue once the step had no job")
	}
	if n, err := s.RetireStepJobs(ctx, s.DB(), op.ID, 10402, []string{"test_step"}); err != nil || n != 0 {
		t.Fatalf("retired %d jobs of another step (%v)", n, err)
	}
}

// TestSettingsAnnouncedInProcess: a saved setting is announced to the
// listeners of every store on the same database in the process (SQLite's
// stand-in for LISTEN/NOTIFY); a closed listener gets nothing.
func TestSettingsAnnouncedInProcess(t *testing.T) {
	t.Parallel()
	db := open(t)
	a, b := db(storetest.Opts{}), db(storetest.Opts{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := b.ListenSettings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	if _, err := a.SaveSetting(ctx, store.SaveSettingParams{Key: "poll.short_interval", Scope: "global",
		Value: json.RawMessage(`"2s"`), UpdatedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	n, err := l.Wait(ctx)
	if err != nil || n.Key != "poll.short_interval" || n.Scope != "global" {
		t.Fatalf("notice = %+v, %v", n, err)
	}
	_ = l.Close(ctx)
	if _, err := a.SaveSetting(ctx, store.SaveSettingParams{Key: "poll.short_interval", Scope: "global",
		Value: json.RawMessage(`"3s"`), UpdatedBy: "alice"}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer wcancel()
	if n, err := l.Wait(wctx); err == nil {
		t.Fatalf("a closed listener got %+v", n)
	}
}

type foreignHandle struct{}

func (foreignHandle) Engine() string { return "postgres" }

// TestForeignHandleRefused: a handle of another implementation fails the
// statement with an error naming both engines, and writes nothing.
func TestForeignHandleRefused(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	err := s.InsertCallbackRequest(context.Background(), foreignHandle{}, "1", "approval", "op", "ACCEPTED")
	if err == nil || !strings.Contains(err.Error(), "postgres") || !strings.Contains(err.Error(), "sqlite") {
		t.Fatalf("err = %v, want one naming both engines", err)
	}
	if _, err := s.CallbackResult(context.Background(), s.DB(), "approval", "1"); err == nil {
		t.Fatal("the refused write was stored")
	}
}

// TestOpenDBIsDurable: every connection OpenDB hands out commits with
// synchronous=FULL (2), so an acknowledged delivery survives an
// operating-system crash; WAL's NORMAL (1) may lose it (issue 21.13).
func TestOpenDBIsDurable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sqlite.OpenDB(filepath.Join(t.TempDir(), "d.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(3)
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	for i, c := range conns {
		var sync int
		var mode string
		if err := c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if sync != 2 || mode != "wal" {
			t.Errorf("connection %d: synchronous=%d journal_mode=%s, want 2 (FULL) and wal", i, sync, mode)
		}
	}
}
