package commands

import (
	"sort"
	"strings"
)

// Invocation is one command found in a note by Parse.
type Invocation struct {
	// Name is the command name, lower-case and without the slash; it always
	// matches ^[a-z][a-z0-9_-]*$ and is at most MaxNameLen bytes long. It
	// may be unknown to the registry (see Known).
	Name string
	// Args are the whitespace-separated words after the name, with HTML
	// comments removed; nil when there are none.
	Args []string
	// Line is the 1-based line of the note the command is on; "\r\n", "\n"
	// and a lone "\r" each end a line, as in CommonMark.
	Line int
	// Raw is the command's line as written, without indentation, trailing
	// whitespace or CR.
	Raw string
	// Addressed is true when the command names the bot ("@changebot retry"
	// or "@changebot /retry"), false for a bare "/retry", which may be
	// meant for another bot of the project.
	Addressed bool
}

// MaxInvocations is the most invocations Parse returns for one note; later
// commands are dropped. Known commands are few and each counts once, so the
// limit only stops a note of thousands of unknown slash words from costing
// thousands of replies or events.
const MaxInvocations = 16

// MaxNameLen is the longest command name Parse accepts; a longer slash word
// is not a command.
const MaxNameLen = 64

// Parse returns the commands in a note's Markdown body, in the order they
// appear, each name once (the first occurrence wins). botUsername enables the
// mention form; it is matched case-insensitively, with or without a leading
// "@", and an empty botUsername disables mentions.
//
// The rules (STYLE rule 22, issue 3), each pinned by a test:
//   - A command is a line that starts, after at most three spaces, with
//     "/name" or with the mention "@bot name" or "@bot /name" (a ":" or ","
//     may follow the mention). Words after the name are Args.
//   - name is [A-Za-z][A-Za-z0-9_-]* up to MaxNameLen, case-insensitive, and
//     must be followed by the end of the line or a space or tab: "/retry."
//     and "/path/to" are not commands, "/ retry" is not, "/retry-later" is
//     the (unknown) command "retry-later".
//   - A slash word elsewhere in a line ("please /retry") is not a command.
//   - Ignored: indented code (four columns of indentation, a tab counting to
//     the next multiple of four), fenced code (``` or ~~~, at least three,
//     indented at most three spaces or opened right after a list marker;
//     closed by a fence of the same character at least as long; an unclosed
//     fence runs to the end), block quotes (lines starting with ">") and
//     GitLab's multi-line quotes (">>>" lines), HTML comments (a line that
//     starts with "<!--" through the line holding "-->"; a comment opened
//     later in a line hides the lines up to its end when it ends within the
//     paragraph), the HTML blocks <pre>, <script>, <style> and <textarea>,
//     and inline code spans, also when one spans lines within a paragraph.
//   - Trailing spaces and tabs are ignored; lines end at CRLF, LF or CR.
//
// Parse is a pure function of its arguments; it is linear in the body's
// length apart from a logarithmic factor for code spans.
func Parse(body, botUsername string) []Invocation {
	return parse(body, strings.TrimPrefix(strings.TrimSpace(botUsername), "@"), false)
}

// MayHoldCommand reports whether Parse could find a command in body for
// some bot username: a slash command, or a mention of anyone followed by a
// command name. The webhook intake answers a note without one at once and
// stores nothing (issue 12), without asking GitLab the robot's username; a
// note that mentions another user ("@alice look") is kept, and the
// executor answers it no_command as before.
func MayHoldCommand(body string) bool { return len(parse(body, "", true)) > 0 }

// parse is Parse with bot already trimmed; anyBot accepts a mention of any
// username.
func parse(body, bot string, anyBot bool) []Invocation {
	d := newDocument(body)
	var (
		out  []Invocation
		seen = make(map[string]bool)
		st   blockState
	)
	for i := 0; i < len(d.lines) && len(out) < MaxInvocations; i++ {
		rest, ok := st.advance(d.lines[i])
		if !ok {
			continue
		}
		text, j, off := d.scanInline(i, rest)
		if inv, ok := parseCommand(text, bot, anyBot); ok && !seen[inv.Name] {
			seen[inv.Name] = true
			inv.Line = i + 1
			inv.Raw = rest
			out = append(out, inv)
		}
		// A code span or comment opened on line i hides the lines up to
		// line j; the rest of line j is text, not the start of a line.
		for j >= 0 {
			i = j
			_, j, off = d.scanInline(i, d.lines[i][off:])
		}
	}
	return out
}

// document is a note split into lines, with the indexes scanInline needs to
// find where a multi-line code span or HTML comment ends in O(log n).
type document struct {
	// lines are the note's lines without CR and trailing spaces or tabs.
	lines []string
	// paraEnd[i] is the first line at or after i that ends a paragraph (a
	// blank line or the start of a block), len(lines) if none.
	paraEnd []int
	// commentEnd[i] is the first line at or after i that holds "-->" or
	// ends a paragraph, len(lines) if none.
	commentEnd []int
	// runs maps a backtick run length to the sorted lines holding a run of
	// exactly that length.
	runs map[int][]int
}

func newDocument(body string) *document {
	raw := splitLines(body)
	d := &document{
		lines:      make([]string, len(raw)),
		paraEnd:    make([]int, len(raw)+1),
		commentEnd: make([]int, len(raw)+1),
		runs:       make(map[int][]int),
	}
	for i, l := range raw {
		d.lines[i] = strings.TrimRight(l, " \t\r")
		for _, n := range backtickRuns(d.lines[i]) {
			if r := d.runs[n]; len(r) == 0 || r[len(r)-1] != i {
				d.runs[n] = append(r, i)
			}
		}
	}
	n := len(d.lines)
	d.paraEnd[n], d.commentEnd[n] = n, n
	for i := n - 1; i >= 0; i-- {
		d.paraEnd[i], d.commentEnd[i] = d.paraEnd[i+1], d.commentEnd[i+1]
		if endsParagraph(d.lines[i]) {
			d.paraEnd[i], d.commentEnd[i] = i, i
		} else if strings.Contains(d.lines[i], "-->") {
			d.commentEnd[i] = i
		}
	}
	return d
}

// scanInline reads s, the text of line i (or its rest after a multi-line
// construct closed), and returns it with complete HTML comments removed and
// cut at a comment that stays open. When a code span or comment opened in s
// closes on a later line of the same paragraph, j is that line and off the
// byte offset just after the closer; otherwise j is -1. A backtick run or
// "<!--" that never closes within the paragraph is literal text, as in
// CommonMark.
func (d *document) scanInline(i int, s string) (text string, j, off int) {
	var b strings.Builder
	for k := 0; k < len(s); {
		switch {
		case s[k] == '`':
			n := runLen(s, k, '`')
			if e := findRun(s, k+n, n); e >= 0 {
				b.WriteString(s[k : e+n])
				k = e + n
				continue
			}
			if j, off := d.codeSpanEnd(i, n); j >= 0 {
				b.WriteString(s[k:])
				return b.String(), j, off
			}
			b.WriteString(s[k : k+n])
			k += n
		case strings.HasPrefix(s[k:], "<!--"):
			// "<!-->" and "<!--->" are complete comments (CommonMark 0.31).
			if e := strings.Index(s[k+2:], "-->"); e >= 0 {
				k += 2 + e + 3
				continue
			}
			if j := d.commentEnd[i+1]; j < d.paraEnd[i+1] {
				return b.String(), j, strings.Index(d.lines[j], "-->") + 3
			}
			b.WriteString("<!--")
			k += 4
		default:
			b.WriteByte(s[k])
			k++
		}
	}
	return b.String(), -1, 0
}

// codeSpanEnd finds the line after i, within i's paragraph, that holds a
// backtick run of exactly n, and the offset after that run.
func (d *document) codeSpanEnd(i, n int) (j, off int) {
	lines := d.runs[n]
	x := sort.SearchInts(lines, i+1)
	if x == len(lines) || lines[x] >= d.paraEnd[i+1] {
		return -1, 0
	}
	j = lines[x]
	return j, findRun(d.lines[j], 0, n) + n
}

// blockState tracks the multi-line block constructs that hide commands.
type blockState struct {
	// fence is the fence character of an open fenced code block, 0 if none.
	fence byte
	// fenceLen is the length of the opening fence.
	fenceLen int
	// fenceMaxIndent is the most indentation a closing fence may have.
	fenceMaxIndent int
	// htmlComment is set inside an HTML comment opened at a line start.
	htmlComment bool
	// htmlEnd is the closing tag of an open <pre>-like HTML block.
	htmlEnd string
	// multiQuote is set inside a GitLab ">>>" multi-line block quote.
	multiQuote bool
}

// advance updates the state with the next line and returns the line without
// its indentation, and ok true, when the line is ordinary text in which a
// command may start.
func (st *blockState) advance(line string) (rest string, ok bool) {
	switch {
	case st.fence != 0:
		if cols, r := indentation(line); cols <= st.fenceMaxIndent && closesFence(r, st.fence, st.fenceLen) {
			st.fence = 0
		}
		return "", false
	case st.htmlComment:
		st.htmlComment = !strings.Contains(line, "-->")
		return "", false
	case st.htmlEnd != "":
		if containsFold(line, st.htmlEnd) {
			st.htmlEnd = ""
		}
		return "", false
	}
	cols, rest := indentation(line)
	if rest == "" || cols >= 4 {
		return "", false // blank, or indented code
	}
	if ch, n, extra, ok := opensFence(rest); ok {
		st.fence, st.fenceLen, st.fenceMaxIndent = ch, n, cols+extra+3
		return "", false
	}
	if strings.HasPrefix(rest, "<!--") {
		st.htmlComment = !strings.Contains(rest[2:], "-->")
		return "", false
	}
	if end, ok := opensHTMLBlock(rest); ok {
		if !containsFold(rest, end) {
			st.htmlEnd = end
		}
		return "", false
	}
	if rest == ">>>" {
		st.multiQuote = !st.multiQuote
		return "", false
	}
	if st.multiQuote || rest[0] == '>' {
		return "", false
	}
	return rest, true
}

// parseCommand reads a command at the start of text (a line without its
// indentation and with HTML comments removed).
func parseCommand(text, bot string, anyBot bool) (Invocation, bool) {
	addressed := false
	switch {
	case strings.HasPrefix(text, "/"):
		text = text[1:]
	case strings.HasPrefix(text, "@") && (bot != "" || anyBot):
		addressed = true
		word, after, _ := cutSpace(text[1:])
		word = strings.TrimRight(word, ":,")
		if anyBot && word == "" || !anyBot && !strings.EqualFold(word, bot) {
			return Invocation{}, false
		}
		text = strings.TrimLeft(after, " \t")
		text = strings.TrimPrefix(text, "/")
	default:
		return Invocation{}, false
	}
	n := nameLen(text)
	if n == 0 || n > MaxNameLen {
		return Invocation{}, false
	}
	if n < len(text) && text[n] != ' ' && text[n] != '\t' {
		return Invocation{}, false
	}
	inv := Invocation{Name: strings.ToLower(text[:n]), Addressed: addressed}
	if args := strings.Fields(text[n:]); len(args) > 0 {
		inv.Args = args
	}
	return inv, true
}

// nameLen returns the length of the ASCII command name [A-Za-z][A-Za-z0-9_-]*
// at the start of s, 0 if there is none. Only ASCII is accepted so that
// lower-casing cannot produce a name outside [a-z] (the Kelvin sign lower-cases
// to "k").
func nameLen(s string) int {
	if s == "" || !isLetter(s[0]) {
		return 0
	}
	n := 1
	for n < len(s) && (isLetter(s[n]) || s[n] >= '0' && s[n] <= '9' || s[n] == '_' || s[n] == '-') {
		n++
	}
	return n
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// cutSpace splits s at its first space or tab.
func cutSpace(s string) (before, after string, found bool) {
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		return s[:i], s[i:], true
	}
	return s, "", false
}

// indentation returns the columns of leading whitespace of line (a tab
// advances to the next multiple of four) and the line without it.
func indentation(line string) (cols int, rest string) {
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case ' ':
			cols++
		case '\t':
			cols += 4 - cols%4
		default:
			return cols, line[i:]
		}
	}
	return cols, ""
}

// opensFence reports whether rest (a line without indentation) opens a
// fenced code block, directly or after a list marker ("- ```", "1. ~~~").
// extra is the width of the list marker and its spaces, which the closing
// fence may be indented by in addition.
func opensFence(rest string) (ch byte, n, extra int, ok bool) {
	if w := listMarkerWidth(rest); w > 0 {
		extra, rest = w, rest[w:]
	}
	if rest == "" || rest[0] != '`' && rest[0] != '~' {
		return 0, 0, 0, false
	}
	ch = rest[0]
	n = runLen(rest, 0, ch)
	if n < 3 || ch == '`' && strings.Contains(rest[n:], "`") {
		return 0, 0, 0, false
	}
	return ch, n, extra, true
}

// closesFence reports whether rest is a closing fence for a block opened
// with n times ch: at least n of ch and nothing after them.
func closesFence(rest string, ch byte, n int) bool {
	m := runLen(rest, 0, ch)
	return m >= n && m == len(rest)
}

// listMarkerWidth returns the width of a list marker ("-", "*", "+", or one
// to nine digits and "." or ")") and the one to four spaces after it at the
// start of s, 0 if s does not start with one.
func listMarkerWidth(s string) int {
	n := 0
	switch {
	case s == "":
		return 0
	case s[0] == '-' || s[0] == '*' || s[0] == '+':
		n = 1
	default:
		for n < len(s) && n < 9 && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n == 0 || n == len(s) || s[n] != '.' && s[n] != ')' {
			return 0
		}
		n++
	}
	sp := 0
	for n+sp < len(s) && s[n+sp] == ' ' && sp < 4 {
		sp++
	}
	if sp == 0 {
		return 0
	}
	return n + sp
}

// htmlBlockTags are the CommonMark type-1 HTML blocks: their content is raw
// until the closing tag, blank lines included.
var htmlBlockTags = []string{"pre", "script", "style", "textarea"}

// opensHTMLBlock reports whether rest starts a type-1 HTML block and returns
// its closing tag.
func opensHTMLBlock(rest string) (end string, ok bool) {
	for _, tag := range htmlBlockTags {
		open := "<" + tag
		if len(rest) < len(open) || !strings.EqualFold(rest[:len(open)], open) {
			continue
		}
		if len(rest) == len(open) || rest[len(open)] == ' ' || rest[len(open)] == '\t' || rest[len(open)] == '>' {
			return "</" + tag + ">", true
		}
	}
	return "", false
}

// endsParagraph reports whether line ends a paragraph: a blank line, or one
// that starts a block which interrupts a paragraph (fence, block quote, HTML
// comment or block, ATX heading, bullet list item).
func endsParagraph(line string) bool {
	cols, rest := indentation(line)
	if rest == "" {
		return true
	}
	if cols >= 4 {
		return false
	}
	if _, _, _, ok := opensFence(rest); ok {
		return true
	}
	if _, ok := opensHTMLBlock(rest); ok {
		return true
	}
	switch {
	case rest[0] == '>', strings.HasPrefix(rest, "<!--"):
		return true
	case rest[0] == '#':
		h := runLen(rest, 0, '#')
		return h <= 6 && (h == len(rest) || rest[h] == ' ' || rest[h] == '\t')
	case rest[0] == '-' || rest[0] == '*' || rest[0] == '+':
		return len(rest) > 1 && (rest[1] == ' ' || rest[1] == '\t')
	}
	return false
}

// splitLines splits body at CommonMark line endings: "\r\n", "\n" or "\r".
func splitLines(body string) []string {
	body = strings.ReplaceAll(body, "\r\n", "\n")
	return strings.Split(strings.ReplaceAll(body, "\r", "\n"), "\n")
}

// runLen returns how many times ch repeats in s from index k.
func runLen(s string, k int, ch byte) int {
	n := 0
	for k+n < len(s) && s[k+n] == ch {
		n++
	}
	return n
}

// findRun returns the index of the first backtick run of exactly n in s at
// or after from, -1 if none.
func findRun(s string, from, n int) int {
	for k := from; k < len(s); {
		if s[k] != '`' {
			k++
			continue
		}
		m := runLen(s, k, '`')
		if m == n {
			return k
		}
		k += m
	}
	return -1
}

// backtickRuns returns the distinct lengths of the backtick runs in s.
func backtickRuns(s string) []int {
	var out []int
	for k := 0; k < len(s); {
		if s[k] != '`' {
			k++
			continue
		}
		m := runLen(s, k, '`')
		dup := false
		for _, x := range out {
			dup = dup || x == m
		}
		if !dup {
			out = append(out, m)
		}
		k += m
	}
	return out
}

// containsFold reports whether s contains the ASCII substring sub, ignoring
// case.
func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), sub)
}
