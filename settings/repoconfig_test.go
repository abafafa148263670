package settings

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"changebot/repoconfig"
)

// TestChangebotYmlKeysFollowSettings keeps each key of .changebot.yml that
// mirrors a runtime setting of the same name (repoconfig's schema, a leaf
// that cannot import this package) equal to the setting: its enum, its
// minimum and its default.
func TestChangebotYmlKeysFollowSettings(t *testing.T) {
	t.Parallel()
	var root map[string]any
	if err := json.Unmarshal(repoconfig.Schema(), &root); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{ApprovalProvider, ApprovalRequired, QueueMode, QueueDeferCI, QueuePipelineRetries, MergeMaxRounds} {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			def, ok := Lookup(key)
			if !ok {
				t.Fatalf("no setting %s", key)
			}
			node := root
			for _, part := range strings.Split(key, ".") {
				props, _ := node["properties"].(map[string]any)
				node, _ = props[part].(map[string]any)
			}
			if node == nil {
				t.Fatalf("the schema has no key %s", key)
			}
			if got := fmt.Sprint(node["default"]); got != def.Default {
				t.Errorf("schema default %s, setting default %s", got, def.Default)
			}
			switch def.Kind {
			case KindEnum:
				var enum []string
				for _, v := range node["enum"].([]any) {
					enum = append(enum, v.(string))
				}
				if !slices.Equal(enum, def.Enum) {
					t.Errorf("schema enum %q, setting enum %q", enum, def.Enum)
				}
			case KindInt:
				if got := fmt.Sprint(node["minimum"]); got != fmt.Sprint(def.Min) || node["type"] != "integer" {
					t.Errorf("schema %v minimum %s, setting minimum %d", node["type"], got, def.Min)
				}
			default:
				t.Errorf("setting kind %v has no check here", def.Kind)
			}
		})
	}
}
