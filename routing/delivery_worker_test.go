package routing

import (
	"context"
	"strings"
	"testing"

	"changebot/platform"
)

// recorder is a state-based stand-in for the flow and the command
// executor: it records which deliveries it was handed.
type recorder struct {
	name string
	got  *[]string
}

func (r recorder) ApplyHook(_ context.Context, _ int64, _ platform.HookEvent) (string, error) {
	*r.got = append(*r.got, r.name)
	return r.name, nil
}

func (r recorder) HandleNote(_ context.Context, _ int64, _ platform.HookEvent) (string, error) {
	*r.got = append(*r.got, r.name)
	return r.name, nil
}

// TestRouteHandsEachEventToItsOwner: comments go to the commands, pipeline
// and merge request events (and anything else) to the flow (DESIGN §8
// delivery routing).
func TestRouteHandsEachEventToItsOwner(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   platform.HookEvent
		want string
	}{
		{"note", platform.HookEvent{Note: &platform.NoteHook{}}, "commands"},
		{"pipeline", platform.HookEvent{Pipeline: &platform.PipelineHook{}}, "flow"},
		{"merge request", platform.HookEvent{MergeRequest: &platform.MergeRequestHook{}}, "flow"},
		{"anything else", platform.HookEvent{}, "flow"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			r := &Router{cfg: RouterConfig{Flow: recorder{"flow", &got}, Notes: recorder{"commands", &got}}}
			outcome, err := r.Route(context.Background(), 1, tc.ev)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != tc.want || outcome != tc.want {
				t.Fatalf("routed to %v (outcome %q), want %s", got, outcome, tc.want)
			}
		})
	}
}

// TestNewRouterNamesEveryMissingPart: a router without its parts is a
// configuration error naming each.
func TestNewRouterNamesEveryMissingPart(t *testing.T) {
	t.Parallel()
	_, err := NewRouter(RouterConfig{})
	if err == nil {
		t.Fatal("NewRouter with nothing: no error")
	}
	for _, want := range []string{"store", "decoder", "flow", "note handler"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
