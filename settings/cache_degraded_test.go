package settings

import (
	"context"
	"testing"
	"time"

	"changebot/store/postgres/pgtest"
)

// TestStartWithoutSettingsTable starts a cache whose settings table is not
// readable (migrations not applied): Start succeeds, lookups answer from the
// initial values and defaults, and the TTL reload picks the table up once
// it exists.
func TestStartWithoutSettingsTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := pgtest.New(t)
	if _, err := sc.Pool.Exec(ctx, `ALTER TABLE settings RENAME TO settings_hidden`); err != nil {
		t.Fatal(err)
	}
	c, _ := newReplica(t, sc, map[string]string{AdmissionMaxActive: "7"}, 200*time.Millisecond)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start without the settings table: %v", err)
	}
	defer c.Close()
	if v := c.Get(AdmissionMaxActive, ""); v.Int() != 7 || v.Source == SourceStored {
		t.Errorf("before the table exists: %+v, want the initial value 7", v)
	}
	if v := c.Get(FlowApprovalFirst, ""); v.Source != SourceDefault {
		t.Errorf("before the table exists: %+v, want the default", v)
	}
	if _, err := sc.Pool.Exec(ctx, `INSERT INTO settings_hidden (key, scope, value, updated_by, updated_at)
		VALUES ($1, 'global', '42', 'psql', now())`, AdmissionMaxActive); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Pool.Exec(ctx, `ALTER TABLE settings_hidden RENAME TO settings`); err != nil {
		t.Fatal(err)
	}
	took := waitFor(5*time.Second, func() bool { return c.Get(AdmissionMaxActive, "").Int() == 42 })
	if took >= 5*time.Second {
		t.Fatalf("the stored value was not loaded once the table existed (%s)", took)
	}
}
