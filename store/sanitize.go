package store

import "strings"

// CleanText makes s storable as text by every engine: NUL characters
// (which PostgreSQL text and jsonb refuse, SQLSTATE 22P05 / 22021) become
// U+FFFD and invalid UTF-8 is replaced. Every implementation applies it
// (the contract suite checks it). Texts from GitLab or users (failure details, reasons)
// pass through here so that a strange message can never block a state write.
func CleanText(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// CleanValue applies CleanText to every string in a JSON-like value.
func CleanValue(v any) any {
	switch x := v.(type) {
	case string:
		return CleanText(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[CleanText(k)] = CleanValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = CleanValue(e)
		}
		return out
	}
	return v
}
