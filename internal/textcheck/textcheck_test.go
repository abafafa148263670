package textcheck

import "testing"

// TestProblem: control characters (C0, DEL, C1), the bidirectional
// formatting characters, the line and paragraph separators and the
// invisible characters are found, the first one named by its code point;
// other text, non-ASCII letters and invisible but harmless characters
// pass.
func TestProblem(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, s, want string }{
		{"plain", "alice", ""},
		{"empty", "", ""},
		{"letters and emoji", "Zoë 😀 日本", ""},
		{"zero-width joiner is not bidi", "a\u200db", ""},
		{"newline", "a\nb", "contains a control character (U+000A)"},
		{"tab", "a\tb", "contains a control character (U+0009)"},
		{"escape", "t\x1b[31m", "contains a control character (U+001B)"},
		{"DEL", "a\x7f", "contains a control character (U+007F)"},
		{"C1", "a\u0085", "contains a control character (U+0085)"},
		{"right-to-left override", "t\u202egpj.exe", "contains a bidirectional formatting character (U+202E)"},
		{"arabic letter mark", "a\u061c", "contains a bidirectional formatting character (U+061C)"},
		{"left-to-right mark", "a\u200e", "contains a bidirectional formatting character (U+200E)"},
		{"first isolate", "a\u2068b", "contains a bidirectional formatting character (U+2068)"},
		{"pop directional isolate", "a\u2069", "contains a bidirectional formatting character (U+2069)"},
		{"the first one is named", "a\u202e\n", "contains a bidirectional formatting character (U+202E)"},
		{"line separator", "a\u2028b", "contains a line or paragraph separator (U+2028)"},
		{"paragraph separator", "a\u2029", "contains a line or paragraph separator (U+2029)"},
		{"byte order mark inside", "a\ufeffb", "contains an invisible character (U+FEFF)"},
		{"zero-width space", "ali\u200bce", "contains an invisible character (U+200B)"},
		{"word joiner", "a\u2060b", "contains an invisible character (U+2060)"},
		{"zero-width non-joiner passes", "a\u200cb", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Problem(tt.s); got != tt.want {
				t.Errorf("Problem(%q) = %q, want %q", tt.s, got, tt.want)
			}
		})
	}
	if r, kind, ok := ForbiddenRune("ab\u2066"); !ok || r != 0x2066 || kind != KindBidi {
		t.Errorf("ForbiddenRune = %U, %q, %v; want U+2066, %q, true", r, kind, ok, KindBidi)
	}
}
