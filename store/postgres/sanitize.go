package postgres

import "strings"

// cleanText makes s storable in PostgreSQL text and jsonb: NUL characters
// (which neither accepts, SQLSTATE 22P05 / 22021) become U+FFFD and invalid
// UTF-8 is replaced. Texts from GitLab or users (failure details, reasons)
// pass through here so that a strange message can never block a state write.
func cleanText(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// cleanValue applies cleanText to every string in a JSON-like value.
func cleanValue(v any) any {
	switch x := v.(type) {
	case string:
		return cleanText(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[cleanText(k)] = cleanValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cleanValue(e)
		}
		return out
	}
	return v
}
