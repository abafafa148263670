package bot

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestHistoryReplayVerifyCommands runs one change to VALIDATED, then the
// history, replay and verify subcommands against its schema; verify finds a
// tampered event.
func TestHistoryReplayVerifyCommands(t *testing.T) {
	env := newTestEnv(t, true, 100*time.Millisecond)
	_, sc := startBot(t, env)
	ctx := context.Background()
	opID, err := submitDemoChange(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	view, err := followChange(ctx, env, opID, 60*time.Second, func(changeView) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DATABASE_URL", sc.URL)
	run := func(args ...string) (string, int) {
		var out, errb strings.Builder
		code := Main(args, &out, &errb)
		return out.String() + errb.String(), code
	}
	if out, code := run("history", opID); code != 0 || !strings.Contains(out, "CALLED_BACK") || !strings.Contains(out, "APPROVAL_SENDING") {
		t.Fatalf("history: %d %s", code, out)
	}
	if out, code := run("replay", opID); code != 0 || !strings.Contains(out, "VALIDATED") {
		t.Fatalf("replay now: %d %s", code, out)
	}
	// The state right after the first event: waiting for approval.
	first := view.Events[0].OccurredAt
	if out, code := run("replay", opID, "-at", first.Format(time.RFC3339Nano)); code != 0 || !strings.Contains(out, "APPROVAL_SENDING") {
		t.Fatalf("replay at the first event: %d %s", code, out)
	}
	if out, code := run("verify"); code != 0 || !strings.Contains(out, "1 operations checked, 0 broken") {
		t.Fatalf("verify: %d %s", code, out)
	}
	if _, err := sc.Pool.Exec(ctx, `UPDATE change_events SET actor = 'mallory' WHERE operation_id = $1 AND seq = 2`, opID); err != nil {
		t.Fatal(err)
	}
	if out, code := run("verify", opID); code == 0 || !strings.Contains(out, "hash chain broken at event 2") {
		t.Fatalf("verify after tampering: %d %s", code, out)
	}
}
