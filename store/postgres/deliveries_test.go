package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/riverqueue/river"

	"changebot/store"
	"changebot/store/postgres"
)

// deliveryArgs is a stand-in process-delivery job (store must not import
// flows).
type deliveryArgs struct {
	DeliveryID int64 `json:"delivery_id"`
}

func (deliveryArgs) Kind() string { return "test_delivery" }

func deliveryJob(id int64) river.InsertManyParams {
	return river.InsertManyParams{Args: deliveryArgs{DeliveryID: id}}
}

// TestDeliveryBodyStoredByteIdentical stores bodies that jsonb refused
// (\u0000, SQLSTATE 22P05) or would have rewritten (spacing, key order,
// duplicate keys), and reads each back byte for byte.
func TestDeliveryBodyStoredByteIdentical(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	tests := []struct {
		name string
		body string
	}{
		{name: "NUL escape in a string", body: `{"object_kind":"note","object_attributes":{"note":"a\u0000b"}}`},
		{name: "NUL escape as a key", body: `{"\u0000":1}`},
		{name: "formatting kept", body: "{ \"b\" : 1,\n  \"a\":[ 1 , 2 ], \"a\": 3 }\n"},
		{name: "non-ASCII", body: `{"title":"déploiement ✓ \ud83d\ude00"}`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := store.Delivery{DedupeKey: "idem:body-" + string(rune('a'+i)), Event: "Note Hook", ProjectID: 7, Body: []byte(tt.body)}
			id, inserted, err := s.InsertDelivery(ctx, d, deliveryJob)
			if err != nil || !inserted {
				t.Fatalf("InsertDelivery: inserted=%v err=%v", inserted, err)
			}
			got, err := s.GetDelivery(ctx, s.DB(), id)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Body, []byte(tt.body)) {
				t.Errorf("body read back as %q, want %q", got.Body, tt.body)
			}
			if got.DedupeKey != d.DedupeKey || got.Event != d.Event || got.ProjectID != d.ProjectID {
				t.Errorf("read back %+v, want the fields of %+v", got, d)
			}
		})
	}
}

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

// TestCallbackRequestsDedupePerKind (issue 9, defect 10): a request id is
// unique within its kind only; migrating down keeps the earliest row of an
// id used by several kinds.
func TestCallbackRequestsDedupePerKind(t *testing.T) {
	t.Parallel()
	s, sc := setup(t)
	ctx := context.Background()
	if err := s.InsertCallbackRequest(ctx, s.DB(), "42", "approval", "op_1", "ACCEPTED"); err != nil {
		t.Fatalf("approval 42: %v", err)
	}
	if err := s.InsertCallbackRequest(ctx, s.DB(), "42", "deploy", "op_2", "IGNORED_STALE"); err != nil {
		t.Fatalf("deploy 42 after approval 42: %v, want it recorded", err)
	}
	if err := s.InsertCallbackRequest(ctx, s.DB(), "42", "deploy", "op_2", "ACCEPTED"); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("deploy 42 again: %v, want ErrDuplicate", err)
	}
	for kind, want := range map[string]string{"approval": "ACCEPTED", "deploy": "IGNORED_STALE"} {
		if got, err := s.CallbackResult(ctx, s.DB(), kind, "42"); err != nil || got != want {
			t.Errorf("result of %s 42: %q %v, want %q", kind, got, err, want)
		}
	}
	if _, err := s.CallbackResult(ctx, s.DB(), "rate_limit", "42"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("result of an unseen kind: %v, want ErrNotFound", err)
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
	if err := postgres.Migrate(ctx, sc.Pool, &postgres.MigrateOpts{Schema: sc.Name, To: 9}); err != nil {
		t.Fatalf("migrating down to 9: %v", err)
	}
	op := create(t, s, newOp("op_wm", "svc"))
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
