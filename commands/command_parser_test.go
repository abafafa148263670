package commands

import (
	"reflect"
	"strings"
	"testing"
)

const testBot = "changebot"

// inv builds an expected invocation.
// inv is the invocation of line; a raw line in the mention form ("@bot …")
// is Addressed.
func inv(line int, raw, name string, args ...string) Invocation {
	if len(args) == 0 {
		args = nil
	}
	return Invocation{Name: name, Args: args, Line: line, Raw: raw, Addressed: strings.HasPrefix(raw, "@")}
}

// parseCases pins every parsing rule of issue 3 and STYLE rule 22. The fuzz
// target seeds its corpus from these bodies.
var parseCases = []struct {
	name string
	body string
	want []Invocation
}{
	// Forms.
	{name: "slash command alone", body: "/retry", want: []Invocation{inv(1, "/retry", "retry")}},
	{name: "slash command with args", body: "/reject not now, sorry", want: []Invocation{inv(1, "/reject not now, sorry", "reject", "not", "now,", "sorry")}},
	{name: "args separated by tabs and runs of spaces", body: "/reject\tnot   now", want: []Invocation{inv(1, "/reject\tnot   now", "reject", "not", "now")}},
	{name: "mention form", body: "@changebot retry", want: []Invocation{inv(1, "@changebot retry", "retry")}},
	{name: "mention form with slash", body: "@changebot /retry", want: []Invocation{inv(1, "@changebot /retry", "retry")}},
	{name: "mention form with args", body: "@changebot reject wrong target", want: []Invocation{inv(1, "@changebot reject wrong target", "reject", "wrong", "target")}},
	{name: "mention username is case-insensitive", body: "@ChangeBot Retry", want: []Invocation{inv(1, "@ChangeBot Retry", "retry")}},
	{name: "mention followed by colon", body: "@changebot: status", want: []Invocation{inv(1, "@changebot: status", "status")}},
	{name: "mention followed by comma", body: "@changebot, help", want: []Invocation{inv(1, "@changebot, help", "help")}},
	{name: "mention with several spaces", body: "@changebot    status", want: []Invocation{inv(1, "@changebot    status", "status")}},
	{name: "mention of another user", body: "@alice retry", want: nil},
	{name: "mention of a longer username", body: "@changebotx retry", want: nil},
	{name: "mention of a shorter username", body: "@changebo retry", want: nil},
	{name: "mention without a command", body: "@changebot", want: nil},
	{name: "mention with a lone slash", body: "@changebot / retry", want: nil},
	{name: "mention glued to the command", body: "@changebot/retry", want: nil},
	{name: "mention not at line start", body: "thanks @changebot retry", want: nil},
	{name: "mention with command in inline code", body: "@changebot `/retry`", want: nil},
	{name: "freeze with a reason", body: "/freeze main is red, see #ops", want: []Invocation{inv(1, "/freeze main is red, see #ops", "freeze", "main", "is", "red,", "see", "#ops")}},
	{name: "freeze without a reason", body: "/freeze", want: []Invocation{inv(1, "/freeze", "freeze")}},
	{name: "unfreeze with a reason", body: "/unfreeze fixed by !44", want: []Invocation{inv(1, "/unfreeze fixed by !44", "unfreeze", "fixed", "by", "!44")}},
	{name: "freeze in the mention form", body: "@changebot freeze release in progress", want: []Invocation{inv(1, "@changebot freeze release in progress", "freeze", "release", "in", "progress")}},
	{name: "freeze, the reason's HTML comment removed", body: "/freeze red <!-- internal --> main", want: []Invocation{inv(1, "/freeze red <!-- internal --> main", "freeze", "red", "main")}},
	{name: "freeze and unfreeze in one note", body: "/freeze\n/unfreeze", want: []Invocation{inv(1, "/freeze", "freeze"), inv(2, "/unfreeze", "unfreeze")}},
	{name: "freeze in fenced code", body: "```\n/freeze\n```", want: nil},
	{name: "freeze glued to a word", body: "/freeze-all now", want: []Invocation{inv(1, "/freeze-all now", "freeze-all", "now")}},
	{name: "freeze inside a sentence", body: "we should /freeze main", want: nil},
	{name: "mention of an unknown command", body: "@changebot thanks", want: []Invocation{inv(1, "@changebot thanks", "thanks")}},

	// Line start.
	{name: "one leading space", body: " /retry", want: []Invocation{inv(1, "/retry", "retry")}},
	{name: "three leading spaces", body: "   /retry", want: []Invocation{inv(1, "/retry", "retry")}},
	{name: "four leading spaces are indented code", body: "    /retry", want: nil},
	{name: "leading tab is indented code", body: "\t/retry", want: nil},
	{name: "spaces then tab reach indented code", body: "  \t/retry", want: nil},
	{name: "slash word inside a sentence", body: "please /retry this", want: nil},
	{name: "slash word after a list marker", body: "- /retry", want: nil},
	{name: "slash word in a heading", body: "# /retry", want: nil},
	{name: "escaped slash", body: `\/retry`, want: nil},
	{name: "command on a later line", body: "The pipeline was flaky.\n/retry\nthanks", want: []Invocation{inv(2, "/retry", "retry")}},

	// Names.
	{name: "upper-case name", body: "/RETRY", want: []Invocation{inv(1, "/RETRY", "retry")}},
	{name: "mixed-case name", body: "/ReTry", want: []Invocation{inv(1, "/ReTry", "retry")}},
	{name: "hyphenated unknown name", body: "/retry-later", want: []Invocation{inv(1, "/retry-later", "retry-later")}},
	{name: "suffixed unknown name", body: "/retryx", want: []Invocation{inv(1, "/retryx", "retryx")}},
	{name: "name with digits and underscore", body: "/re_try2", want: []Invocation{inv(1, "/re_try2", "re_try2")}},
	{name: "space after the slash", body: "/ retry", want: nil},
	{name: "lone slash", body: "/", want: nil},
	{name: "double slash", body: "//retry", want: nil},
	{name: "name starting with a digit", body: "/2fa", want: nil},
	{name: "name starting with a hyphen", body: "/-retry", want: nil},
	{name: "path at line start", body: "/path/to/file", want: nil},
	{name: "path segment then space", body: "/path to", want: []Invocation{inv(1, "/path to", "path", "to")}},
	{name: "punctuation glued to the name", body: "/retry.", want: nil},
	{name: "non-ASCII letter in the name", body: "/retrý", want: nil},
	{name: "Kelvin sign is not a k", body: "/\u212Aill", want: nil},
	{name: "name at the length limit", body: "/" + strings.Repeat("a", MaxNameLen), want: []Invocation{inv(1, "/"+strings.Repeat("a", MaxNameLen), strings.Repeat("a", MaxNameLen))}},
	{name: "name over the length limit", body: "/" + strings.Repeat("a", MaxNameLen+1), want: nil},

	// Whitespace and line endings.
	{name: "trailing spaces and tabs", body: "/retry  \t ", want: []Invocation{inv(1, "/retry", "retry")}},
	{name: "CRLF line endings", body: "hello\r\n/retry\r\n/status\r\n", want: []Invocation{inv(2, "/retry", "retry"), inv(3, "/status", "status")}},
	{name: "lone CR ends a line", body: "hello\r/retry\r/status", want: []Invocation{inv(2, "/retry", "retry"), inv(3, "/status", "status")}},
	{name: "CR inside args ends the line", body: "/reject a\rb", want: []Invocation{inv(1, "/reject a", "reject", "a")}},
	{name: "CRLF with args", body: "/reject too risky\r\n", want: []Invocation{inv(1, "/reject too risky", "reject", "too", "risky")}},
	{name: "empty body", body: "", want: nil},
	{name: "blank lines only", body: "\n \n\t\n", want: nil},

	// Several commands.
	{name: "several commands in order", body: "/status\n/retry\n@changebot help", want: []Invocation{inv(1, "/status", "status"), inv(2, "/retry", "retry"), inv(3, "@changebot help", "help")}},
	{name: "the same command twice counts once", body: "/retry\n/retry again", want: []Invocation{inv(1, "/retry", "retry")}},
	{name: "the same command in both forms counts once", body: "@changebot retry\n/RETRY", want: []Invocation{inv(1, "@changebot retry", "retry")}},
	{name: "many distinct commands are capped", body: manyCommands(MaxInvocations + 5), want: manyInvocations(MaxInvocations)},

	// Fenced code.
	{name: "backtick fence", body: "```\n/retry\n```", want: nil},
	{name: "tilde fence", body: "~~~\n/retry\n~~~", want: nil},
	{name: "fence with info string", body: "```sh\n/retry\n```\n/status", want: []Invocation{inv(4, "/status", "status")}},
	{name: "indented fence", body: "   ```\n/retry\n   ```\n/status", want: []Invocation{inv(4, "/status", "status")}},
	{name: "closing fence must be at least as long", body: "````\n/retry\n```\n/cancel\n````\n/status", want: []Invocation{inv(6, "/status", "status")}},
	{name: "closing fence must use the same character", body: "```\n~~~\n/retry\n```\n/status", want: []Invocation{inv(5, "/status", "status")}},
	{name: "closing fence may be longer", body: "```\n/retry\n`````\n/status", want: []Invocation{inv(4, "/status", "status")}},
	{name: "closing fence with text is content", body: "```\n``` /retry\n/cancel\n```\n/status", want: []Invocation{inv(5, "/status", "status")}},
	{name: "unclosed fence runs to the end", body: "```\n/retry\n\n/status", want: nil},
	{name: "four-space indented fence is not a fence", body: "    ```\n/retry\n    ```", want: []Invocation{inv(2, "/retry", "retry")}},
	{name: "backtick fence info with a backtick is inline code", body: "```/cancel```\n/retry", want: []Invocation{inv(2, "/retry", "retry")}},
	{name: "two backticks do not open a fence", body: "``\n/retry", want: []Invocation{inv(2, "/retry", "retry")}},
	{name: "fence in a list item", body: "- ```\n  /retry\n  ```\n/status", want: []Invocation{inv(4, "/status", "status")}},
	{name: "fence in an ordered list item", body: "1. ~~~\n   /retry\n   ~~~\n/status", want: []Invocation{inv(4, "/status", "status")}},
	{name: "fence with CRLF", body: "```\r\n/retry\r\n```\r\n/status\r\n", want: []Invocation{inv(4, "/status", "status")}},

	// Indented code.
	{name: "indented code block after a blank line", body: "example:\n\n    /retry\n\n/status", want: []Invocation{inv(5, "/status", "status")}},

	// Inline code.
	{name: "command in inline code", body: "`/retry`", want: nil},
	{name: "command in inline code mid-sentence", body: "use `/retry` when ready", want: nil},
	{name: "command in double-backtick code", body: "`` /retry ``", want: nil},
	{name: "inline code after the command", body: "/reject `config.yaml` is wrong", want: []Invocation{inv(1, "/reject `config.yaml` is wrong", "reject", "`config.yaml`", "is", "wrong")}},
	{name: "code span over several lines", body: "see `the\n/retry\ncommand` here\n/status", want: []Invocation{inv(4, "/status", "status")}},
	{name: "GitLab inline code on separate rows", body: "`\n/retry\n`", want: nil},
	{name: "unclosed backtick is literal", body: "a ` here\n/retry", want: []Invocation{inv(2, "/retry", "retry")}},
	{name: "code span does not cross a blank line", body: "a ` here\n\n/retry\nand ` there", want: []Invocation{inv(3, "/retry", "retry")}},
	{name: "code span closes only on the same run length", body: "a `` here\n/retry\nand ` there", want: []Invocation{inv(2, "/retry", "retry")}},
	{name: "text after a multi-line code span is not a line start", body: "a `\nb` /retry", want: nil},

	// Block quotes.
	{name: "quoted command", body: "> /retry", want: nil},
	{name: "quoted command without space", body: ">/retry", want: nil},
	{name: "quoted command with indentation", body: "   > /retry", want: nil},
	{name: "nested quote", body: "> > /retry", want: nil},
	{name: "quoted mention", body: "> @changebot retry", want: nil},
	{name: "reply below a quote", body: "> did you /retry?\n> /retry\n\n/status", want: []Invocation{inv(4, "/status", "status")}},
	{name: "GitLab multi-line quote", body: ">>>\n/retry\n>>>\n/status", want: []Invocation{inv(4, "/status", "status")}},
	{name: "multi-line quote with a fence inside", body: ">>>\n```\n>>>\n/retry\n```\n/cancel\n>>>\n/status", want: []Invocation{inv(8, "/status", "status")}},

	// HTML comments.
	{name: "comment on one line", body: "<!-- /retry -->", want: nil},
	{name: "multi-line comment", body: "<!--\n/retry\n-->\n/status", want: []Invocation{inv(4, "/status", "status")}},
	{name: "multi-line comment with blank lines", body: "<!--\n\n/retry\n\n-->\n/status", want: []Invocation{inv(6, "/status", "status")}},
	{name: "text after a closing comment", body: "<!--\nx --> /retry\n/status", want: []Invocation{inv(3, "/status", "status")}},
	{name: "command after a one-line comment", body: "<!-- note --> /retry", want: nil},
	{name: "short comment forms", body: "<!-->\n/retry\n<!--->\n/status", want: []Invocation{inv(2, "/retry", "retry"), inv(4, "/status", "status")}},
	{name: "unclosed comment runs to the end", body: "<!--\n/retry", want: nil},
	{name: "indented comment", body: "  <!--\n/retry\n-->", want: nil},
	{name: "comment removed from args", body: "/reject <!-- private --> too risky", want: []Invocation{inv(1, "/reject <!-- private --> too risky", "reject", "too", "risky")}},
	{name: "comment glued to the name", body: "/retry<!-- x -->", want: []Invocation{inv(1, "/retry<!-- x -->", "retry")}},
	{name: "comment opened mid-line hides following lines", body: "note <!-- hidden\n/retry\n--> end\n/status", want: []Invocation{inv(4, "/status", "status")}},
	{name: "comment opened after a command", body: "/status <!-- and\n/retry\n-->", want: []Invocation{inv(1, "/status <!-- and", "status")}},
	{name: "comment opened mid-line without end is literal", body: "a <!-- b\n/retry", want: []Invocation{inv(2, "/retry", "retry")}},
	{name: "comment opener in inline code is literal", body: "a `<!--` b\n/retry\n-->", want: []Invocation{inv(2, "/retry", "retry")}},

	// HTML blocks.
	{name: "pre block", body: "<pre>\n/retry\n</pre>\n/status", want: []Invocation{inv(4, "/status", "status")}},
	{name: "upper-case pre block", body: "<PRE class=x>\n/retry\n</Pre>\n/status", want: []Invocation{inv(4, "/status", "status")}},
	{name: "one-line pre block", body: "<pre>/retry</pre>\n/status", want: []Invocation{inv(2, "/status", "status")}},
	{name: "other HTML does not hide commands", body: "<details>\n\n/retry\n\n</details>", want: []Invocation{inv(3, "/retry", "retry")}},
}

func manyCommands(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("/cmd")
		b.WriteString(strings.Repeat("x", i))
		b.WriteString("\n")
	}
	return b.String()
}

func manyInvocations(n int) []Invocation {
	out := make([]Invocation, n)
	for i := range out {
		raw := "/cmd" + strings.Repeat("x", i)
		out[i] = inv(i+1, raw, raw[1:])
	}
	return out
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Parse(tc.body, testBot)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q)\n got: %#v\nwant: %#v", tc.body, got, tc.want)
			}
		})
	}
}

func TestParseBotUsername(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		bot  string
		body string
		want []Invocation
	}{
		{name: "username with leading at sign", bot: "@changebot", body: "@changebot retry", want: []Invocation{inv(1, "@changebot retry", "retry")}},
		{name: "username with dots and hyphens", bot: "change.bot-1", body: "@Change.Bot-1 status", want: []Invocation{inv(1, "@Change.Bot-1 status", "status")}},
		{name: "empty username disables mentions", bot: "", body: "@ retry\n@changebot retry", want: nil},
		{name: "empty username keeps slash commands", bot: "", body: "/retry", want: []Invocation{inv(1, "/retry", "retry")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Parse(tc.body, tc.bot)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q, %q)\n got: %#v\nwant: %#v", tc.body, tc.bot, got, tc.want)
			}
		})
	}
}

// TestParseLargeBody checks that pathological notes (GitLab allows 1,000,000
// characters) parse in linear time: each body would take minutes if a
// construct rescanned the rest of the note per line.
func TestParseLargeBody(t *testing.T) {
	t.Parallel()
	const lines = 100_000
	tests := []struct {
		name string
		line string
	}{
		{name: "unclosed backticks on every line", line: "x ` y"},
		{name: "unclosed comments on every line", line: "x <!-- y"},
		{name: "many backtick run lengths", line: "` `` ``` ```` `````"},
		{name: "commands on every line", line: "/retry now"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := strings.Repeat(tc.line+"\n", lines)
			if got := Parse(body, testBot); len(got) > MaxInvocations {
				t.Errorf("Parse returned %d invocations, want at most %d", len(got), MaxInvocations)
			}
		})
	}
}

// TestMayHoldCommand: true for every note Parse finds a command in, for
// whichever bot username, false for notes the intake may drop unstored
// (issue 12).
func TestMayHoldCommand(t *testing.T) {
	tests := []struct {
		body string
		want bool
	}{
		{"/retry", true},
		{"  /unknown-command with args", true},
		{"@changebot retry", true},
		{"@ChangeBot: /status", true},
		{"@alice please look", true}, // a mention of anyone may be the robot's
		{"text first\n\n/retry", true},
		{"LGTM, thanks!", false},
		{"please /retry", false},
		{"> /retry", false},
		{"    /retry", false},
		{"```\n/retry\n```", false},
		{"<!-- /retry -->", false},
		{"`/retry`", false},
		{"/retry.", false},
		{"@ retry", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := MayHoldCommand(tt.body); got != tt.want {
			t.Errorf("MayHoldCommand(%q) = %v, want %v", tt.body, got, tt.want)
		}
	}
	for _, tc := range parseCases {
		if len(Parse(tc.body, testBot)) > 0 && !MayHoldCommand(tc.body) {
			t.Errorf("MayHoldCommand(%q) = false, but Parse finds a command", tc.body)
		}
	}
}
