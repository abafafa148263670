package flows_test

import (
	"slices"
	"testing"

	"github.com/riverqueue/river"

	"changebot/flows/rules"
	"changebot/store"
)

// TestRulesNamesMatchTheStore pins the persisted names package rules
// declares to the store's and River's (the leaf imports neither): a status,
// platform or queue renamed on one side only would write rows the other
// side does not recognise.
func TestRulesNamesMatchTheStore(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		got, want []string
	}{
		{"statuses", rules.Statuses(), store.AllStatuses},
		{"platforms", []string{rules.PlatformGitLab, rules.PlatformGitHub}, []string{store.PlatformGitLab, store.PlatformGitHub}},
		{"default queue", []string{rules.QueueDefault}, []string{river.QueueDefault}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if !slices.Equal(tt.got, tt.want) {
				t.Errorf("rules has %v, want %v", tt.got, tt.want)
			}
		})
	}
	for _, s := range store.AllStatuses {
		if rules.Reappliable(s) != store.IsReappliable(s) || rules.Failed(s) != store.IsFailed(s) {
			t.Errorf("%s: rules says reappliable %v failed %v, the store %v %v", s,
				rules.Reappliable(s), rules.Failed(s), store.IsReappliable(s), store.IsFailed(s))
		}
	}
}
