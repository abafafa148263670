// Package textcheck finds the characters with which one line of text
// people read (a name, a title, an audit's actor) would show on a page or a
// terminal as other text than it is: control characters, Unicode's line
// and paragraph separators, invisible characters that hide between
// letters, and the bidirectional formatting characters. The change API, the callbacks and
// the settings' updated_by refuse them with the one wording of Problem.
package textcheck

import (
	"fmt"
	"unicode"
)

// The kinds ForbiddenRune returns, worded to follow "contains".
const (
	// KindControl is a C0 or C1 control character or DEL (unicode.IsControl:
	// a newline, a tab, an escape).
	KindControl = "a control character"
	// KindBidi is a bidirectional formatting character (IsBidiFormatting).
	KindBidi = "a bidirectional formatting character"
	// KindLineBreak is U+2028 LINE SEPARATOR or U+2029 PARAGRAPH
	// SEPARATOR: a line break that is not a control character.
	KindLineBreak = "a line or paragraph separator"
	// KindInvisible is a character that shows as nothing between letters
	// (IsInvisible).
	KindInvisible = "an invisible character"
)

// ForbiddenRune returns the first control character, bidirectional
// formatting character, line or paragraph separator or invisible character
// of s and its kind (KindControl, KindBidi, KindLineBreak, KindInvisible);
// ok is false when s has none. Invalid UTF-8 is not its business (it reads as
// U+FFFD, which passes).
func ForbiddenRune(s string) (r rune, kind string, ok bool) {
	for _, r := range s {
		if kind := KindOf(r); kind != "" {
			return r, kind, true
		}
	}
	return 0, "", false
}

// KindOf is the kind of r when one line of text may not hold it
// (KindControl, KindBidi, KindLineBreak or KindInvisible), "" when it may.
func KindOf(r rune) string {
	switch {
	case unicode.IsControl(r):
		return KindControl
	case IsBidiFormatting(r):
		return KindBidi
	case r == 0x2028 || r == 0x2029:
		return KindLineBreak
	case IsInvisible(r):
		return KindInvisible
	}
	return ""
}

// IsBidiFormatting reports whether r is one of Unicode's bidirectional
// formatting characters (UAX #9, "Explicit Directional Embeddings,
// Overrides and Isolates", and the implicit marks): U+061C, U+200E,
// U+200F, U+202A to U+202E, U+2066 to U+2069.
func IsBidiFormatting(r rune) bool {
	return r == 0x061C || r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// IsInvisible reports whether r shows as nothing and joins nothing: U+200B
// ZERO WIDTH SPACE, U+2060 WORD JOINER and U+FEFF ZERO WIDTH NO-BREAK SPACE
// (a byte order mark inside text). The zero-width joiner and non-joiner
// (U+200C, U+200D) pass: emoji sequences and several scripts need them.
func IsInvisible(r rune) bool {
	return r == 0x200B || r == 0x2060 || r == 0xFEFF
}

// Problem words what ForbiddenRune finds in s, to follow a field's name:
// "contains a control character (U+001B)", "contains a bidirectional
// formatting character (U+202E)"; "" when s has none.
func Problem(s string) string {
	if r, kind, ok := ForbiddenRune(s); ok {
		return Describe(r, kind)
	}
	return ""
}

// Describe words a rune and kind from ForbiddenRune as Problem does.
func Describe(r rune, kind string) string {
	return fmt.Sprintf("contains %s (%U)", kind, r)
}
