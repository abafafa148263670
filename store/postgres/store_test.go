package postgres_test

import (
	"context"
	"testing"

	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

func setup(t *testing.T) (*postgres.Store, pgtest.Schema) {
	t.Helper()
	sc := pgtest.New(t)
	s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
	if err != nil {
		t.Fatal(err)
	}
	return s, sc
}

func newOp(id, subject string) store.Operation {
	return store.Operation{ID: id, SubjectID: subject, TargetKey: "prod", Project: "g/r", Title: "t",
		RequestedBy: "alice", ApprovalFirst: true, Step: 10401, Status: store.StatusApprovalSending,
		Files: []store.File{{Path: "a.yaml", Content: "x: 1"}}}
}

func create(t *testing.T, s *postgres.Store, op store.Operation) store.Operation {
	t.Helper()
	got, created, err := s.CreateOperation(context.Background(), store.CreateParams{Operation: op,
		Event: store.EventParams{Type: store.EventSubmitted, Actor: op.RequestedBy, Source: "api"}})
	if err != nil || !created {
		t.Fatalf("CreateOperation: created=%v err=%v", created, err)
	}
	return got
}

func TestMigrateIsReversible(t *testing.T) {
	t.Parallel()
	_, sc := setup(t)
	ctx := context.Background()
	if err := postgres.Migrate(ctx, sc.Pool, &postgres.MigrateOpts{Schema: sc.Name}); err != nil {
		t.Fatalf("second up: %v", err)
	}
	if v, cur, err := postgres.MigrationStatus(sc.Pool, sc.Name); err != nil || !cur || v != postgres.LatestMigration {
		t.Fatalf("status after up: v=%d current=%v err=%v", v, cur, err)
	}
	if err := postgres.Migrate(ctx, sc.Pool, &postgres.MigrateOpts{Schema: sc.Name, Down: true}); err != nil {
		t.Fatalf("down: %v", err)
	}
	var n int
	if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name IN ('operations','bindings','change_events','river_job')`, sc.Name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("tables left after down: %d (%v)", n, err)
	}
	if err := postgres.Migrate(ctx, sc.Pool, &postgres.MigrateOpts{Schema: sc.Name}); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
