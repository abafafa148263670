package notify

import (
	"testing"

	"changebot/flows/rules"
	"changebot/repoconfig"
	"changebot/store"
)

// TestJobsRouted (issue 25 point 2): a `.changebot.yml` route replaces
// the event list of the destination it names for the repository's
// changes, never widens a destination to a project it does not serve,
// ignores a destination the server has not configured, and leaves the
// destinations it does not name as the server routes them.
func TestJobsRouted(t *testing.T) {
	t.Parallel()
	r, err := NewRouter([]Destination{
		{Name: "ops", Kind: KindSlack, URL: "https://h/a", Events: []Event{EventFailed}},
		{Name: "team", Kind: KindWebhook, URL: "https://h/b", Secret: "k", Events: []Event{EventApplied}, Projects: []string{"g/*"}},
		{Name: "other", Kind: KindWebhook, URL: "https://h/c", Secret: "k", Projects: []string{"x/*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	op := store.Operation{ID: "op_1", Project: "g/r", ProjectID: 7, Step: int(rules.HandleMerged), Status: rules.StatusMerged}
	merged := store.Event{Type: store.EventTransition, Seq: 9, FromStep: int(rules.HandleStarted), ToStep: int(rules.HandleMerged)}
	if ev, ok := MoveEvent(rules.HandleStarted, rules.HandleMerged); !ok || ev != EventMerged {
		t.Fatalf("the move raises %q, %v; the test wants merged", ev, ok)
	}
	tests := []struct {
		name   string
		routes []repoconfig.Route
		dests  []string
	}{
		{"no routes: the server's routing (nobody takes merged)", nil, nil},
		{"the file asks merged of ops", []repoconfig.Route{{Destination: "ops", Events: []string{"merged"}}}, []string{"ops"}},
		{"the file's list replaces the server's", []repoconfig.Route{{Destination: "ops", Events: []string{"failed"}}}, nil},
		{"a destination of other projects takes nothing", []repoconfig.Route{{Destination: "other", Events: []string{"merged"}}}, nil},
		{"an unknown destination is ignored", []repoconfig.Route{{Destination: "nowhere", Events: []string{"merged"}}, {Destination: "team", Events: []string{"merged", "applied"}}}, []string{"team"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			jobs := r.JobsRouted(op, merged, tt.routes)
			if len(jobs) != len(tt.dests) {
				t.Fatalf("%d jobs, want %v", len(jobs), tt.dests)
			}
			for i, j := range jobs {
				if a := j.Args.(DeliverArgs); a.Destination != tt.dests[i] || a.Payload.Event != EventMerged {
					t.Errorf("job %d: %+v, want %s", i, a, tt.dests[i])
				}
			}
		})
	}
	rolled := op
	rolled.RolloutID = "ro-1"
	if jobs := r.JobsRouted(rolled, merged, []repoconfig.Route{{Destination: "ops", Events: []string{"merged"}}}); len(jobs) != 0 {
		t.Errorf("a change of a rollout got %d per-change jobs; its rollout's summary tells it", len(jobs))
	}
}
