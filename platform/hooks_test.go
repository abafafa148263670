package platform_test

import (
	"testing"

	"changebot/platform"
)

// TestMergeRequestHookLabels pins when a merge request webhook adopts (the
// label shown newly), lets go (the label taken off) or neither, for the
// label "changebot" (matched without regard to case).
func TestMergeRequestHookLabels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                  string
		hook                  platform.MergeRequestHook
		added, removed, maybe bool
	}{
		{"open with the label", platform.MergeRequestHook{Action: "open", Labels: []string{"ChangeBot"}}, true, false, true},
		{"open without it", platform.MergeRequestHook{Action: "open", Labels: []string{"docs"}}, false, false, false},
		{"reopen with the label", platform.MergeRequestHook{Action: "reopen", Labels: []string{"changebot"}}, true, false, true},
		{"label added", platform.MergeRequestHook{Action: "update", Labels: []string{"docs", "changebot"},
			LabelsChanged: true, LabelsBefore: []string{"docs"}}, true, false, true},
		{"another label added while it is there", platform.MergeRequestHook{Action: "update", Labels: []string{"changebot", "docs"},
			LabelsChanged: true, LabelsBefore: []string{"changebot"}}, false, false, false},
		{"label removed", platform.MergeRequestHook{Action: "update", Labels: []string{"docs"},
			LabelsChanged: true, LabelsBefore: []string{"docs", "changebot"}}, false, true, true},
		{"an edit of a labelled merge request", platform.MergeRequestHook{Action: "update", Labels: []string{"changebot"}}, false, false, false},
		{"reviewers requested", platform.MergeRequestHook{Action: "update", ReviewersAdded: []string{"robot"}}, false, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := tc.hook
			if got := h.LabelAdded("changebot"); got != tc.added {
				t.Errorf("LabelAdded = %v, want %v", got, tc.added)
			}
			if got := h.LabelRemoved("changebot"); got != tc.removed {
				t.Errorf("LabelRemoved = %v, want %v", got, tc.removed)
			}
			if got := h.MayAdopt("changebot"); got != tc.maybe {
				t.Errorf("MayAdopt = %v, want %v", got, tc.maybe)
			}
		})
	}
}
