package templates

import (
	"fmt"
	"net/url"
	"strings"
	"text/template"
	"time"
)

// TimeLayout is how the status comment shows times, always in UTC.
const TimeLayout = "2006-01-02 15:04:05Z"

// funcs are the functions templates may call. Every user-controlled text
// must go through text, cell, code or quote; links through link.
var funcs = template.FuncMap{
	"text":     escapeText,
	"cell":     escapeCell,
	"code":     codeSpan,
	"quote":    quoteBlock,
	"link":     escapeURL,
	"linkto":   linkTo,
	"utc":      formatUTC,
	"duration": formatDuration,
	"cmd":      func(name string) string { return codeSpan("/" + name) },
	// title capitalises the first letter of a fixed word of ours
	// ("merge request" → "Merge request"); never user text.
	"title": func(s string) string {
		if s == "" {
			return s
		}
		return strings.ToUpper(s[:1]) + s[1:]
	},
	// anyof and allof join user texts, each escaped as text: "a, b or c"
	// and "a, b and c".
	"anyof":  func(items []string) string { return joinWords(items, "or") },
	"allof":  func(items []string) string { return joinWords(items, "and") },
	"plural": Plural,
}

// joinWords joins items, each escaped as escapeText does, with commas and
// last before the final one: "carol, dave or a member of platform/sre".
func joinWords(items []string, last string) string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = escapeText(it)
	}
	if len(out) < 2 {
		return strings.Join(out, "")
	}
	return strings.Join(out[:len(out)-1], ", ") + " " + last + " " + out[len(out)-1]
}

// escapeText makes s safe on one Markdown line: line breaks become spaces,
// every "<" is shown as text, so that no HTML of a person's text (a reason,
// a title) renders: an HTML comment opener would hide what follows or fake
// a status marker, a "</details>" would close the timeline early; and "@"
// gets a zero-width space after it so that user text ("@all" in a title)
// never mentions anyone when the bot posts or edits a comment.
func escapeText(s string) string {
	return textReplacer.Replace(s)
}

var textReplacer = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "<", "&lt;", "@", "@\u200b")

// escapeCell makes s safe inside one Markdown table cell: escapeText, and
// pipes escaped so they do not split the cell.
func escapeCell(s string) string {
	return strings.ReplaceAll(escapeText(s), "|", `\|`)
}

// codeSpan shows s as inline code, with a backtick fence longer than any
// backtick run in s, on one line. Pipes are escaped too, which GitHub- and
// GitLab-flavoured tables require even inside code.
func codeSpan(s string) string {
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "|", `\|`).Replace(s)
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

// quoteBlock shows s, which may span lines, as a Markdown block quote, with
// comment openers and mentions neutralised as in escapeText.
func quoteBlock(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.NewReplacer("<!--", "&lt;!--", "@", "@\u200b").Replace(strings.TrimRight(s, "\n"))
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight("> "+l, " \t\r")
	}
	return strings.Join(lines, "\n")
}

// linkTo renders a Markdown link with the text label to u, or the label
// alone when u is empty or not an http(s) URL.
func linkTo(label, u string) string {
	label = strings.NewReplacer("[", `\[`, "]", `\]`).Replace(escapeText(label))
	if target := escapeURL(u); target != "" {
		return "[" + label + "](" + target + ")"
	}
	return label
}

// escapeURL makes u safe as the target of a Markdown link: only http and
// https links with a host are kept (anything else becomes ""), and spaces,
// parentheses and angle brackets are percent-encoded.
func escapeURL(u string) string {
	p, err := url.Parse(strings.TrimSpace(u))
	if err != nil || p.Scheme != "http" && p.Scheme != "https" || p.Host == "" {
		return ""
	}
	return strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29", "<", "%3C", ">", "%3E").Replace(p.String())
}

// Plural is one for n == 1, else many: "1 event", "2 events".
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// formatUTC shows t in UTC as TimeLayout, or "-" for the zero time.
func formatUTC(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(TimeLayout)
}

// formatDuration shows d in words when it is whole hours, minutes or
// seconds ("1 hour", "10 minutes"), else in Go's notation.
func formatDuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if d >= u.d && d%u.d == 0 {
			n := int64(d / u.d)
			if n == 1 {
				return "1 " + u.name
			}
			return fmt.Sprintf("%d %ss", n, u.name)
		}
	}
	return d.String()
}
