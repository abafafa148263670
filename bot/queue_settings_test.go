package bot

import (
	"slices"
	"testing"

	"changebot/flows/rules"
	"changebot/settings"
)

// TestQueueSettingsEnumsAreTheRulesValues keeps the accepted values of
// queue.mode and queue.defer_ci equal to the values the queue's rules
// decide on (rules.QueueModes, rules.DeferCIModes), and their defaults
// the rules' auto: a value the settings accept and the rules do not know
// would be read as auto silently.
func TestQueueSettingsEnumsAreTheRulesValues(t *testing.T) {
	for _, c := range []struct {
		key  string
		want []string
		auto string
	}{
		{settings.QueueMode, rules.QueueModes, rules.QueueAuto},
		{settings.QueueDeferCI, rules.DeferCIModes, rules.DeferCIAuto},
	} {
		d, ok := settings.Lookup(c.key)
		if !ok {
			t.Fatalf("%s is not a setting", c.key)
		}
		if !slices.Equal(d.Enum, c.want) {
			t.Errorf("%s accepts %v, the rules know %v", c.key, d.Enum, c.want)
		}
		if d.Default != c.auto {
			t.Errorf("%s defaults to %q, want %q", c.key, d.Default, c.auto)
		}
	}
}
