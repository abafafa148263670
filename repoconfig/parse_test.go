package repoconfig

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func intPtr(n int) *int { return &n }

func TestParseValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		want Policy
	}{
		{"version only", "version: 1\n", Policy{Version: 1}},
		{"comments and a document start", "# policy\n---\nversion: 1 # the format\n", Policy{Version: 1}},
		{"every key", `version: 1
paths:
  - match: "envs/*/apps/**/values.yaml"
    subject: "{2}"
    target: "{1}"
approval:
  provider: gitlab
  approvers: [alice, bob]
  required: 2
queue:
  mode: "on"
  defer_ci: "off"
  pipeline_retries: 0
merge:
  max_rounds: 5
notify:
  - destination: ops-slack
    events: [failed, needs_person]
`, Policy{
			Version:  1,
			Paths:    []PathRule{{Match: "envs/*/apps/**/values.yaml", Subject: "{2}", Target: "{1}"}},
			Approval: &Approval{Provider: "gitlab", Approvers: []string{"alice", "bob"}, Required: 2},
			Queue:    &Queue{Mode: "on", DeferCI: "off", PipelineRetries: intPtr(0)},
			Merge:    &Merge{MaxRounds: 5},
			Notify:   []Route{{Destination: "ops-slack", Events: []string{"failed", "needs_person"}}},
		}},
		{"empty sections", "version: 1\nqueue: {}\napproval: {}\n", Policy{Version: 1, Queue: &Queue{}, Approval: &Approval{}}},
		{"literal placeholder braces stay", "version: 1\npaths:\n  - {match: 'a/*', subject: 'x-{1}-{y}', target: t}\n",
			Policy{Version: 1, Paths: []PathRule{{Match: "a/*", Subject: "x-{1}-{y}", Target: "t"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse([]byte(tt.file))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		want []Problem
	}{
		{"missing version", "queue:\n  mode: auto\n",
			[]Problem{{Key: "version", Line: 1, Message: "is required and missing"}}},
		{"wrong version", "version: 2\n",
			[]Problem{{Key: "version", Line: 1, Message: "must be 1 (not 2)"}}},
		{"version as text", "version: \"1\"\n",
			[]Problem{{Key: "version", Line: 1, Message: `must be 1 (not "1")`}}},
		{"unknown top-level key", "version: 1\n\nqueues:\n  mode: on\n",
			[]Problem{{Key: "queues", Line: 3, Message: "is not a key here; the keys here are approval, merge, notify, paths, queue, version"}}},
		{"unknown nested key", "version: 1\nqueue:\n  mode: auto\n  moed: on\n",
			[]Problem{{Key: "queue.moed", Line: 4, Message: "is not a key here; the keys here are defer_ci, mode, pipeline_retries"}}},
		{"enum", "version: 1\nqueue:\n\n  mode: always\n",
			[]Problem{{Key: "queue.mode", Line: 4, Message: `must be one of auto, on, off (not "always")`}}},
		{"type: mapping wanted", "version: 1\nmerge: 3\n",
			[]Problem{{Key: "merge", Line: 2, Message: "must be a mapping of keys, not a number"}}},
		{"type: whole number wanted", "version: 1\nmerge:\n  max_rounds: 1.5\n",
			[]Problem{{Key: "merge.max_rounds", Line: 3, Message: "must be a whole number, not a number"}}},
		{"empty section", "version: 1\nqueue:\n",
			[]Problem{{Key: "queue", Line: 2, Message: "must be a mapping of keys, not empty"}}},
		{"minimum", "version: 1\napproval:\n  required: 0\nqueue:\n  pipeline_retries: -1\n",
			[]Problem{
				{Key: "approval.required", Line: 3, Message: "must be at least 1"},
				{Key: "queue.pipeline_retries", Line: 5, Message: "must be at least 0"},
			}},
		{"list item missing a key, another's empty", "version: 1\npaths:\n  - match: a/*\n    subject: s\n    target: t\n  - match: b/*\n    subject: ''\n",
			[]Problem{
				{Key: "paths[1].target", Line: 6, Message: "is required and missing"},
				{Key: "paths[1].subject", Line: 7, Message: "must not be empty"},
			}},
		{"notify: unknown event, repeated event, no events", "version: 1\nnotify:\n  - destination: d\n    events:\n      - merged\n      - merged\n      - deployed\n  - destination: e\n    events: []\n",
			[]Problem{
				{Key: "notify[0].events", Line: 4, Message: "lists the same value twice (items 0 and 1)"},
				{Key: "notify[0].events[2]", Line: 7, Message: `must be one of needs_person, failed, merged, applied (not "deployed")`},
				{Key: "notify[1].events", Line: 9, Message: "must list at least 1 item(s)"},
			}},
		{"glob: ** inside a segment", "version: 1\npaths:\n  - match: 'a/x**/b'\n    subject: s\n    target: t\n",
			[]Problem{{Key: "paths[0].match", Line: 3, Message: `"a/x**/b": ** must be a whole path segment (a/**/b), not part of one`}}},
		{"placeholder beyond the wildcards, with a schema problem", "version: 1\nqueue:\n  mode: x\npaths:\n  - match: 'a/*'\n    subject: '{2}'\n    target: '{0}'\n  - match: a\n    subject: '{1}'\n    target: t\n",
			[]Problem{
				{Key: "queue.mode", Line: 3, Message: `must be one of auto, on, off (not "x")`},
				{Key: "paths[0].subject", Line: 6, Message: "uses {2} but the rule's match has 1 wildcard(s): use {1} to {1}"},
				{Key: "paths[0].target", Line: 7, Message: "uses {0} but the rule's match has 1 wildcard(s): use {1} to {1}"},
				{Key: "paths[1].subject", Line: 9, Message: "uses {1} but the rule's match has no wildcard"},
			}},
		{"anchor and alias", "version: 1\napproval:\n  approvers: &people [a]\nmerge: *people\n",
			[]Problem{
				{Key: "approval.approvers", Line: 3, Message: "uses a YAML anchor or alias (& or *); write the value out"},
				{Key: "merge", Line: 4, Message: "uses a YAML anchor or alias (& or *); write the value out"},
			}},
		{"two documents", "version: 1\n---\nversion: 1\n",
			[]Problem{{Line: 3, Message: "the file holds more than one YAML document (a second `---`); it must hold one"}}},
		{"empty file", "", []Problem{{Message: "the file is empty; it needs at least `version: 1`"}}},
		{"comments only", "# nothing yet\n", []Problem{{Message: "the file is empty; it needs at least `version: 1`"}}},
		{"not a mapping", "- version: 1\n", []Problem{{Line: 1, Message: "must be a mapping of keys, not a list"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.file))
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("Parse error = %v, want *InvalidError", err)
			}
			if !reflect.DeepEqual(ie.Problems, tt.want) {
				t.Errorf("problems:\n got %#v\nwant %#v", ie.Problems, tt.want)
			}
		})
	}
}

// TestParseSyntaxErrorsGiveALine pins that YAML the parser refuses is one
// problem at the line the parser names.
func TestParseSyntaxErrorsGiveALine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		line int
	}{
		{"unclosed flow list", "version: 1\npaths: [\n", 2},
		{"duplicate key", "version: 1\nqueue:\n  mode: on\n  mode: off\n", 4},
		{"tab indentation", "version: 1\nqueue:\n\tmode: on\n", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.file))
			var ie *InvalidError
			if !errors.As(err, &ie) || len(ie.Problems) != 1 {
				t.Fatalf("Parse error = %v, want one problem", err)
			}
			p := ie.Problems[0]
			if p.Line != tt.line || !strings.HasPrefix(p.Message, "the file is not valid YAML: ") {
				t.Errorf("problem = %+v, want line %d and a YAML message", p, tt.line)
			}
		})
	}
}

func TestParseRefusesLargeFile(t *testing.T) {
	t.Parallel()
	file := "version: 1\n" + strings.Repeat("#", MaxFileSize)
	_, err := Parse([]byte(file))
	var ie *InvalidError
	if !errors.As(err, &ie) || len(ie.Problems) != 1 || ie.Problems[0].Line != 0 || !strings.Contains(ie.Problems[0].Message, "64 KiB") {
		t.Fatalf("Parse error = %v, want one whole-file problem naming 64 KiB", err)
	}
	if _, err := Parse([]byte(("version: 1\n" + strings.Repeat("#", MaxFileSize))[:MaxFileSize])); err != nil {
		t.Errorf("a file of exactly MaxFileSize bytes: %v", err)
	}
}

func TestProblemString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{Key: "queue.mode", Line: 7, Message: "must be one of auto, on, off"}, "line 7 `queue.mode`: must be one of auto, on, off"},
		{Problem{Line: 2, Message: "the file is not valid YAML: x"}, "line 2: the file is not valid YAML: x"},
		{Problem{Message: "the file is empty"}, "the file is empty"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
	e := &InvalidError{Problems: []Problem{tests[0].p, tests[1].p}}
	if want := "invalid .changebot.yml: line 7 `queue.mode`: must be one of auto, on, off; line 2: the file is not valid YAML: x"; e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
}

// TestSchemaShape pins the schema's house rules: every object closed
// (additionalProperties false) and every property described.
func TestSchemaShape(t *testing.T) {
	t.Parallel()
	var root map[string]any
	if err := json.Unmarshal(Schema(), &root); err != nil {
		t.Fatal(err)
	}
	if root["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v, want draft 2020-12", root["$schema"])
	}
	var walk func(path string, s map[string]any)
	walk = func(path string, s map[string]any) {
		if s["type"] == "object" && s["additionalProperties"] != false {
			t.Errorf("%s: object without additionalProperties: false", path)
		}
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			p := p.(map[string]any)
			if d, _ := p["description"].(string); d == "" {
				t.Errorf("%s.%s: no description", path, name)
			}
			walk(path+"."+name, p)
		}
		if items, ok := s["items"].(map[string]any); ok {
			walk(path+"[]", items)
		}
	}
	walk("", root)
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"version: 1\n",
		"version: 1\npaths:\n  - match: 'a/**/*.yaml'\n    subject: '{1}'\n    target: '{2}'\n",
		"version: 1\nqueue: {mode: on, defer_ci: off, pipeline_retries: 2}\nnotify: [{destination: d, events: [merged]}]\n",
		"a: &x [1]\nb: *x\n<<: {c: 1}\n",
		"version: !!str 1\n",
		"version: .inf\n",
		"--- \n...\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		var ie *InvalidError
		switch {
		case err == nil:
			if p.Version != 1 {
				t.Fatalf("valid policy with version %d", p.Version)
			}
		case errors.As(err, &ie):
			if len(ie.Problems) == 0 {
				t.Fatal("InvalidError without problems")
			}
		default:
			t.Fatalf("Parse error of another type: %v", err)
		}
	})
}
