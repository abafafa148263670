package commands

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

var validName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// FuzzParse checks Parse's invariants on arbitrary notes: it never panics,
// every name is well formed, lines are in range and increasing, no name
// repeats, the result is deterministic, and quoting or indenting every line
// of a note, or wrapping it in an HTML comment or a fence, hides all its
// commands, and MayHoldCommand holds for every note Parse finds one in. Run it with
//
//	go test ./commands -run='^$' -fuzz=FuzzParse -fuzztime=20s
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.body, testBot)
	}
	f.Add("@bot retry\n/status", "bot")
	f.Add("@ retry", "")
	f.Fuzz(func(t *testing.T, body, bot string) {
		got := Parse(body, bot)
		checkInvariants(t, body, got)
		if len(got) > 0 && !MayHoldCommand(body) {
			t.Fatalf("MayHoldCommand(%q) is false, but Parse finds %#v for bot %q", body, got, bot)
		}

		if again := Parse(body, bot); !reflect.DeepEqual(got, again) {
			t.Fatalf("Parse is not deterministic on %q:\n%#v\n%#v", body, got, again)
		}
		if quoted := Parse(prefixLines(body, "> "), bot); len(quoted) != 0 {
			t.Fatalf("quoted note %q yields %#v, want nothing", body, quoted)
		}
		if indented := Parse(prefixLines(body, "    "), bot); len(indented) != 0 {
			t.Fatalf("indented note %q yields %#v, want nothing", body, indented)
		}
		// Without ">" the note cannot close a comment, without "~" a fence.
		commented := "<!--\n" + strings.ReplaceAll(body, ">", "") + "\n-->"
		if got := Parse(commented, bot); len(got) != 0 {
			t.Fatalf("note in an HTML comment %q yields %#v, want nothing", commented, got)
		}
		fenced := "~~~\n" + strings.ReplaceAll(body, "~", "") + "\n~~~"
		if got := Parse(fenced, bot); len(got) != 0 {
			t.Fatalf("note in a fence %q yields %#v, want nothing", fenced, got)
		}
	})
}

func checkInvariants(t *testing.T, body string, got []Invocation) {
	t.Helper()
	if len(got) > MaxInvocations {
		t.Fatalf("%d invocations, want at most %d", len(got), MaxInvocations)
	}
	lines := len(splitLines(body))
	seen := make(map[string]bool)
	prev := 0
	for _, inv := range got {
		if !validName.MatchString(inv.Name) || len(inv.Name) > MaxNameLen {
			t.Fatalf("invalid name %q in %#v", inv.Name, inv)
		}
		if inv.Line < 1 || inv.Line > lines {
			t.Fatalf("line %d outside 1..%d in %#v", inv.Line, lines, inv)
		}
		if inv.Line <= prev {
			t.Fatalf("line %d not after line %d: %#v", inv.Line, prev, got)
		}
		prev = inv.Line
		if seen[inv.Name] {
			t.Fatalf("duplicate name %q in %#v", inv.Name, got)
		}
		seen[inv.Name] = true
		if inv.Raw == "" || strings.ContainsAny(inv.Raw, "\n\r") {
			t.Fatalf("raw %q is empty or spans lines", inv.Raw)
		}
		for _, a := range inv.Args {
			if a == "" || strings.ContainsAny(a, " \t\n\r") {
				t.Fatalf("arg %q is empty or holds whitespace", a)
			}
		}
	}
}

// prefixLines puts prefix before every line of body.
func prefixLines(body, prefix string) string {
	return prefix + strings.Join(splitLines(body), "\n"+prefix)
}
