package store_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/riverqueue/river"

	"changebot/store"
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
	s, sc := setup(t)
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
			got, err := s.GetDelivery(ctx, sc.Pool, id)
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
	// Back to the jsonb column (what the down migration does), insert a
	// row there, and migrate up again.
	if _, err := sc.Pool.Exec(ctx, `ALTER TABLE webhook_deliveries ALTER COLUMN body TYPE jsonb USING convert_from(body, 'UTF8')::jsonb;
		UPDATE changebot_schema_migrations SET version = version - 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Pool.Exec(ctx, `INSERT INTO webhook_deliveries (dedupe_key, event, body, received_at)
		VALUES ('idem:old', 'Note Hook', '{"b": 1, "a": "é"}'::jsonb, now())`); err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, sc.Pool, &store.MigrateOpts{Schema: sc.Name}); err != nil {
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
