package repoconfig

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Glob is a compiled path rule match. Its syntax, over a path of segments
// separated by "/" (repository paths have no leading "/"):
//
//   - `*` matches any text within one segment, empty included;
//   - `?` matches exactly one character within a segment;
//   - `**`, as a whole segment, matches any number of whole segments,
//     zero included (`a/**/b` matches `a/b` and `a/x/y/b`; `a/**` matches
//     every path under `a/`; `**/b` matches `b` anywhere);
//   - every other character matches itself.
//
// The glob matches the whole path. Its wildcards are numbered from 1, left
// to right; each captures the text it matched (for `**` without the slash
// around it), which a rule's subject and target name as {1}, {2}, ….
type Glob struct {
	re        *regexp.Regexp
	wildcards int
}

// CompileGlob compiles pattern; the error says why it is not a glob (an
// empty pattern, or `**` beside other characters in a segment).
func CompileGlob(pattern string) (Glob, error) {
	if pattern == "" {
		return Glob{}, errors.New("must not be empty")
	}
	var b strings.Builder
	b.WriteString("^")
	n := 0
	segs := strings.Split(pattern, "/")
	for i, seg := range segs {
		last := i == len(segs)-1
		if seg == "**" {
			n++
			if last {
				b.WriteString("(.+)")
			} else {
				b.WriteString("(?:(.+)/)?")
			}
			continue
		}
		if strings.Contains(seg, "**") {
			return Glob{}, fmt.Errorf("%q: ** must be a whole path segment (a/**/b), not part of one", pattern)
		}
		for _, r := range seg {
			switch r {
			case '*':
				n++
				b.WriteString("([^/]*)")
			case '?':
				n++
				b.WriteString("([^/])")
			default:
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		if !last {
			b.WriteString("/")
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return Glob{}, fmt.Errorf("compiling glob %q: %w", pattern, err)
	}
	return Glob{re: re, wildcards: n}, nil
}

// Wildcards is the number of wildcards (`*`, `?`, `**`) in the glob.
func (g Glob) Wildcards() int { return g.wildcards }

// Match reports whether the glob matches the whole path and, when it
// does, the text each wildcard matched, in order (len Wildcards()).
func (g Glob) Match(path string) ([]string, bool) {
	if g.re == nil {
		return nil, false
	}
	m := g.re.FindStringSubmatch(path)
	if m == nil {
		return nil, false
	}
	return m[1:], true
}

// placeholder is {N} in a rule's subject or target.
var placeholder = regexp.MustCompile(`\{([0-9]+)\}`)

// checkPlaceholders reports a placeholder naming a wildcard the glob lacks.
func checkPlaceholders(text string, wildcards int) error {
	for _, m := range placeholder.FindAllStringSubmatch(text, -1) {
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 1 || n > wildcards {
			if wildcards == 0 {
				return fmt.Errorf("uses %s but the rule's match has no wildcard", m[0])
			}
			return fmt.Errorf("uses %s but the rule's match has %d wildcard(s): use {1} to {%d}", m[0], wildcards, wildcards)
		}
	}
	return nil
}

// expand replaces each {N} in text with the Nth capture.
func expand(text string, captures []string) string {
	return placeholder.ReplaceAllStringFunc(text, func(m string) string {
		n, err := strconv.Atoi(m[1 : len(m)-1])
		if err != nil || n < 1 || n > len(captures) {
			return m
		}
		return captures[n-1]
	})
}
