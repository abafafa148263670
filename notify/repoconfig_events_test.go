package notify

import (
	"encoding/json"
	"slices"
	"testing"

	"changebot/repoconfig"
)

// TestChangebotYmlEventsAreNotifyEvents keeps the enum of
// notify[].events in the schema of .changebot.yml (repoconfig, a leaf that
// cannot import this package) equal to Events, in the same order.
func TestChangebotYmlEventsAreNotifyEvents(t *testing.T) {
	t.Parallel()
	var schema struct {
		Properties struct {
			Notify struct {
				Items struct {
					Properties struct {
						Events struct {
							Items struct {
								Enum []string `json:"enum"`
							} `json:"items"`
						} `json:"events"`
					} `json:"properties"`
				} `json:"items"`
			} `json:"notify"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(repoconfig.Schema(), &schema); err != nil {
		t.Fatal(err)
	}
	got := schema.Properties.Notify.Items.Properties.Events.Items.Enum
	var want []string
	for _, e := range Events() {
		want = append(want, string(e))
	}
	if !slices.Equal(got, want) {
		t.Errorf("schema notify[].events enum = %q, want notify.Events() %q", got, want)
	}
}
