package postgres_test

import (
	"context"
	"testing"

	"changebot/store/postgres"
)

// TestDeliveryBodyMigrationKeepsRows applies the body migration to a
// delivery stored as jsonb: it is kept, as jsonb's text form.
func TestDeliveryBodyMigrationKeepsRows(t *testing.T) {
	t.Parallel()
	_, sc := setup(t)
	ctx := context.Background()
	// Back to the jsonb column (before migration 0008), insert a row there,
	// and migrate up again.
	if err := postgres.Migrate(ctx, sc.Pool, &postgres.MigrateOpts{Schema: sc.Name, To: 7}); err != nil {
		t.Fatalf("migrating down to 7: %v", err)
	}
	if _, err := sc.Pool.Exec(ctx, `INSERT INTO webhook_deliveries (dedupe_key, event, body, received_at)
		VALUES ('idem:old', 'Note Hook', '{"b": 1, "a": "é"}'::jsonb, now())`); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(ctx, sc.Pool, &postgres.MigrateOpts{Schema: sc.Name}); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	var body []byte
	if err := sc.Pool.QueryRow(ctx, `SELECT body FROM webhook_deliveries WHERE dedupe_key = 'idem:old'`).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if want := `{"a": "é", "b": 1}`; string(body) != want {
		t.Errorf("migrated body %q, want %q", body, want)
	}
}

// TestCallbackRequestsMigrateDownWithSharedID: migration 0009's down
// step copes with a request id recorded for two kinds.
func TestCallbackRequestsMigrateDownWithSharedID(t *testing.T) {
	t.Parallel()
	s, sc := setup(t)
	ctx := context.Background()
	for _, kind := range []string{"approval", "deploy"} {
		if err := s.InsertCallbackRequest(ctx, s.DB(), "42", kind, "op_1", "ACCEPTED"); err != nil {
			t.Fatalf("%s 42: %v", kind, err)
		}
	}
	if err := postgres.Migrate(ctx, sc.Pool, &postgres.MigrateOpts{Schema: sc.Name, Down: true}); err != nil {
		t.Fatalf("migrating down with an id shared by two kinds: %v", err)
	}
}

// TestDeployConfirmationsMigrationBackfills: migration 0010 turns the
// accepted deploy callbacks recorded before it into confirmations of their
// MR's project and target branch.
func TestDeployConfirmationsMigrationBackfills(t *testing.T) {
	t.Parallel()
	s, sc := setup(t)
	ctx := context.Background()
	// Created before going down: the store writes the columns of the
	// newest schema (operations.platform, migration 0015).
	op := create(t, s, newOp("op_wm", "svc"))
	if err := postgres.Migrate(ctx, sc.Pool, &postgres.MigrateOpts{Schema: sc.Name, To: 9}); err != nil {
		t.Fatalf("migrating down to 9: %v", err)
	}
	if _, err := sc.Pool.Exec(ctx, `UPDATE operations SET project_id = 7, target_branch = 'release', mr_iid = 12 WHERE id = $1`, op.ID); err != nil {
		t.Fatal(err)
	}
	for kind, result := range map[string]string{"deploy": "ACCEPTED", "approval": "ACCEPTED"} {
		if err := s.InsertCallbackRequest(ctx, s.DB(), "r-"+kind, kind, op.ID, result); err != nil {
			t.Fatal(err)
		}
	}
	if err := postgres.Migrate(ctx, sc.Pool, &postgres.MigrateOpts{Schema: sc.Name}); err != nil {
		t.Fatalf("migrating up: %v", err)
	}
	var n int
	if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM deploy_confirmations
		WHERE project_id = 7 AND target_branch = 'release' AND mr_iid = 12`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("confirmations of !12 into release: %d (%v), want 1", n, err)
	}
	if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM deploy_confirmations`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("confirmations: %d (%v), want 1", n, err)
	}
}
