package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/store"
)

// TestHistoryReplayVerifyCommands runs one change to VALIDATED, then the
// history, replay and verify subcommands against its schema; verify finds a
// tampered event.
func TestHistoryReplayVerifyCommands(t *testing.T) {
	env := newTestEnv(t, true, 100*time.Millisecond)
	_, sc := startBot(t, env)
	ctx := context.Background()
	opID, err := demo.SubmitChange(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	view, err := demo.FollowChange(ctx, env, opID, 60*time.Second, func(api.ChangeView) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DATABASE_URL", sc.URL)
	run := func(args ...string) (string, int) {
		var out, errb strings.Builder
		code := cliMain(args, &out, &errb)
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
	if out, code := run("verify"); code != 0 || !strings.Contains(out, "1 operation checked, 0 broken") {
		t.Fatalf("verify: %d %s", code, out)
	}
	// The events API (any token) and history -json give the same events:
	// upcast by default, as stored (hash chain intact) with form=stored.
	for _, form := range []string{"", "stored"} {
		var fromAPI api.EventsView
		u := env.BaseURL + "/api/v1/changes/" + opID + "/events"
		if form != "" {
			u += "?form=" + form
		}
		httpJSON(t, "GET", u, "Bearer "+demo.APIToken, "", http.StatusOK, &fromAPI)
		args := []string{"history", opID, "-json"}
		if form == "stored" {
			args = append(args, "-stored")
		}
		out, code := run(args...)
		var cli api.EventsView
		if err := json.Unmarshal([]byte(out), &cli); code != 0 || err != nil {
			t.Fatalf("history -json: %d %v %s", code, err, out)
		}
		if !reflect.DeepEqual(compactPayloads(t, fromAPI), compactPayloads(t, cli)) || len(fromAPI.Events) != len(view.Events) {
			t.Fatalf("form %q: the API and history -json differ:\n%s\n%s", form, mustJSON(fromAPI), out)
		}
		if form == "stored" {
			var stored struct{ Events []store.Event }
			httpJSON(t, "GET", u, "Bearer "+demo.APIToken, "", http.StatusOK, &stored)
			if seq, err := store.VerifyChain(stored.Events); fromAPI.Form != "stored" || err != nil {
				t.Fatalf("stored events from the API do not verify at %d: %v", seq, err)
			}
		} else if fromAPI.Form != "current" || fromAPI.Events[0].SchemaVersion != store.EventSchemaVersion {
			t.Fatalf("default form %q, first event version %d", fromAPI.Form, fromAPI.Events[0].SchemaVersion)
		}
	}
	var bad map[string]string
	httpJSON(t, "GET", env.BaseURL+"/api/v1/changes/"+opID+"/events?form=raw", "Bearer "+demo.APIToken, "", http.StatusBadRequest, &bad)
	if !strings.Contains(bad["error"], "form") {
		t.Fatalf("form=raw: %v, want the error to name form", bad)
	}
	httpJSON(t, "GET", env.BaseURL+"/api/v1/changes/op_missing/events", "Bearer "+demo.APIToken, "", http.StatusNotFound, &bad)
	if _, err := sc.Pool.Exec(ctx, `UPDATE change_events SET actor = 'mallory' WHERE operation_id = $1 AND seq = 2`, opID); err != nil {
		t.Fatal(err)
	}
	if out, code := run("verify", opID); code == 0 || !strings.Contains(out, "hash chain broken at event 2") {
		t.Fatalf("verify after tampering: %d %s", code, out)
	}
}

// compactPayloads returns v with every payload compacted (history -json
// indents them).
func compactPayloads(t *testing.T, v api.EventsView) api.EventsView {
	t.Helper()
	out := v
	out.Events = append([]api.Event(nil), v.Events...)
	for i, ev := range out.Events {
		var b bytes.Buffer
		if err := json.Compact(&b, ev.Payload); err != nil {
			t.Fatal(err)
		}
		out.Events[i].Payload = b.Bytes()
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
