package bot

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/flows/rules"
)

// TestChangePageReplaysAt (issue 13 point 2, "a replay at control"): the
// change's page rebuilds the state its events give at the moment asked
// for, greys the later events, says when the change did not exist yet,
// and answers 400 naming `at` when it is not an RFC 3339 time.
func TestChangePageReplaysAt(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 200*time.Millisecond)
	startBot(t, env)
	ctx := context.Background()
	opID, err := demo.SubmitChange(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	view, err := demo.FollowChange(ctx, env, opID, 60*time.Second, func(api.ChangeView) {})
	if err != nil {
		t.Fatal(err)
	}
	if len(view.Events) < 4 {
		t.Fatalf("%d events, want at least 4", len(view.Events))
	}
	get := func(at string) (int, string) {
		return viewerPage(t, env, "/ui/changes/"+opID+"?at="+url.QueryEscape(at))
	}

	// At a transition (the third event or the first after it that is
	// strictly earlier than the next): its step and status, events after
	// it greyed.
	third := view.Events[2]
	for i := 2; i+1 < len(view.Events); i++ {
		if view.Events[i].Type == "transition" && view.Events[i+1].OccurredAt.After(view.Events[i].OccurredAt) {
			third = view.Events[i]
			break
		}
	}
	code, body := get(third.OccurredAt.UTC().Format(time.RFC3339Nano))
	if code != http.StatusOK {
		t.Fatalf("replay at the third event: %d", code)
	}
	want := "the change was <strong>" + third.ToStatus + "</strong> at step " + rules.StepCode(third.ToStep).String()
	if !strings.Contains(body, want) {
		t.Errorf("replay at the third event lacks %q:\n%s", want, body)
	}
	later := 0
	for _, ev := range view.Events {
		if ev.OccurredAt.After(third.OccurredAt) {
			later++
		}
	}
	if got := strings.Count(body, `<tr class="later">`); got != later {
		t.Errorf("%d rows greyed, want %d (events after the third)", got, later)
	}

	// Before the first event: nothing existed.
	_, body = get(view.Events[0].OccurredAt.Add(-time.Hour).UTC().Format(time.RFC3339))
	if !strings.Contains(body, "did not exist yet") || strings.Count(body, `<tr class="later">`) != len(view.Events) {
		t.Errorf("replay before the first event:\n%s", body)
	}

	// Not a time: 400 naming the parameter.
	code, body = get("yesterday")
	if code != http.StatusBadRequest || !strings.Contains(body, "at: not an RFC 3339 time") {
		t.Errorf("at=yesterday: %d\n%s", code, body)
	}

	// Without `at`: no replay line, nothing greyed.
	_, plain := viewerPage(t, env, "/ui/changes/"+opID)
	if strings.Contains(plain, `id="replayed"`) || strings.Contains(plain, `class="later"`) {
		t.Errorf("the page replays without being asked")
	}
}
