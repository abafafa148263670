package bot

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"changebot/settings"
)

// TestPeriodicSettingsFollowTheStore (issue 9, defect 11): the reconciler
// and sweeper settings come from the runtime settings (config file initial
// values, then stored values), read again at every pass.
func TestPeriodicSettingsFollowTheStore(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	env.Config.Settings = map[string]string{settings.ReconcileMinAge: "20m"}
	app, _ := startBot(t, env)
	rc, sc := app.periodicConfig()
	if got := rc.LiveFunc().MinAge; got != 20*time.Minute {
		t.Fatalf("reconcile.min_age from the config file: %s, want 20m", got)
	}
	ctx := context.Background()
	for key, v := range map[string]string{settings.ReconcileMinAge: "45m", settings.ReconcileMaxAge: "3h",
		settings.ReconcileQuietAfter: "7m", settings.SweeperAfter: "25m"} {
		raw, _ := json.Marshal(v)
		if err := app.Settings().Set(ctx, key, "", raw, "test"); err != nil {
			t.Fatalf("setting %s: %v", key, err)
		}
	}
	live := rc.LiveFunc()
	if live.MinAge != 45*time.Minute || live.MaxAge != 3*time.Hour || live.QuietAfter != 7*time.Minute {
		t.Fatalf("reconciler after the settings changed: %+v", live)
	}
	if got := sc.AfterFunc(); got != 25*time.Minute {
		t.Fatalf("sweeper.after after the setting changed: %s, want 25m", got)
	}
}
