package api

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxIdempotencyKey is the longest Idempotency-Key accepted, in bytes.
const maxIdempotencyKey = 255

// TextInput refuses, with a 400 naming the part, a request whose text
// cannot be stored as PostgreSQL text: a path, query value or
// Idempotency-Key with a NUL byte or invalid UTF-8 (or a key over
// maxIdempotencyKey bytes), and, when checkBody is set, a JSON body that is
// not valid UTF-8, has an unpaired \u surrogate escape or a \u0000 escape in
// any string. Such input used to reach the database and come back as a 503
// "try again", which a client retries for ever. The body is read up to
// limit+1 bytes and handed on unchanged, so the handler's own size limit
// still answers 413.
func TextInput(limit int64, checkBody bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if problem := textProblem(r); problem != "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": problem})
			return
		}
		if checkBody && r.Body != nil {
			body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
			if err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the request body could not be read"})
				return
			}
			if int64(len(body)) <= limit {
				if problem := jsonTextProblem(body); problem != "" {
					writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the request body " + problem})
					return
				}
			}
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		}
		next.ServeHTTP(w, r)
	})
}

// textProblem names the first part of r's path, query or Idempotency-Key
// that is not storable text, or returns "".
func textProblem(r *http.Request) string {
	bad := func(s string) bool { return !utf8.ValidString(s) || strings.ContainsRune(s, 0) }
	if bad(r.URL.Path) {
		return "the path contains a NUL byte or invalid UTF-8"
	}
	for k, vs := range r.URL.Query() {
		for _, v := range vs {
			if bad(k) || bad(v) {
				return "query parameter " + strconv.Quote(strings.ToValidUTF8(strings.ReplaceAll(k, "\x00", ""), "?")) + " contains a NUL byte or invalid UTF-8"
			}
		}
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if bad(key) {
			return "the Idempotency-Key header contains a NUL byte or invalid UTF-8"
		}
		if len(key) > maxIdempotencyKey {
			return "the Idempotency-Key header is longer than " + strconv.Itoa(maxIdempotencyKey) + " bytes"
		}
	}
	return ""
}

// jsonTextProblem says what in the JSON body b cannot be stored as text,
// or returns "".
func jsonTextProblem(b []byte) string { return jsonEscapesProblem(b, false) }

// jsonEscapesProblem says whether the JSON text b is invalid UTF-8, has an
// unpaired or malformed \u escape, or (unless nulOK) a \u0000 escape, or
// returns "". It walks the escapes of b: a \\ pair is skipped whole, so an
// escaped backslash followed by "u0000" is not taken for a NUL.
func jsonEscapesProblem(b []byte, nulOK bool) string {
	if !utf8.Valid(b) {
		return "is not valid UTF-8"
	}
	high := false // the previous escape was a high surrogate
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			if high {
				return "has an unpaired \\u surrogate escape"
			}
			continue
		}
		i++
		if b[i] != 'u' || i+4 >= len(b) {
			if high {
				return "has an unpaired \\u surrogate escape"
			}
			continue
		}
		r, err := strconv.ParseUint(string(b[i+1:i+5]), 16, 32)
		i += 4
		switch {
		case err != nil:
			return "has a malformed \\u escape"
		case r == 0 && !nulOK:
			return "contains a NUL character (\\u0000)"
		case r >= 0xD800 && r < 0xDC00:
			if high {
				return "has an unpaired \\u surrogate escape"
			}
			high = true
		case r >= 0xDC00 && r < 0xE000:
			if !high {
				return "has an unpaired \\u surrogate escape"
			}
			high = false
		default:
			if high {
				return "has an unpaired \\u surrogate escape"
			}
		}
	}
	if high {
		return "has an unpaired \\u surrogate escape"
	}
	return ""
}
