package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTextInputRefusesUnstorableText pins that text PostgreSQL cannot store
// (NUL, invalid UTF-8, unpaired surrogates) in a path, a query, the
// Idempotency-Key or a checked JSON body answers 400 naming the part and
// never reaches the handler (it used to reach the database and answer 503).
func TestTextInputRefusesUnstorableText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", maxIdempotencyKey+1)
	tests := []struct {
		name, target, key, body string
		want                    int
		mention                 string
	}{
		{"plain", "/api/v1/changes/op_1", "k1", `{"request_id":"r1"}`, 200, ""},
		{"escaped backslash then u0000 is text", "/x", "", `{"v":"a\\u0000"}`, 200, ""},
		{"paired surrogates", "/x", "", `{"v":"\ud83d\ude00"}`, 200, ""},
		{"NUL in the path", "/api/v1/changes/op_%00", "", "", 400, "path"},
		{"invalid UTF-8 in the path", "/api/v1/changes/op_%ff", "", "", 400, "path"},
		{"NUL in a query value", "/api/v1/settings/x?project=p%00", "", "", 400, "query parameter"},
		{"invalid UTF-8 in the key", "/x", "k\xff", "", 400, "Idempotency-Key"},
		{"key too long", "/x", long, "", 400, "longer than 255"},
		{"NUL escape in the body", "/x", "", `{"request_id":"r\u0000"}`, 400, "NUL"},
		{"invalid UTF-8 in the body", "/x", "", "{\"v\":\"\xff\"}", 400, "UTF-8"},
		{"lone surrogate in the body", "/x", "", `{"v":"\ud800"}`, 400, "surrogate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got string
			called := false
			h := TextInput(1<<10, true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				called = true
				b, _ := io.ReadAll(r.Body)
				got = string(b)
			}))
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
			req.URL.RawPath = ""
			u, err := req.URL.Parse(tc.target)
			if err != nil {
				t.Fatal(err)
			}
			req.URL = u
			if tc.key != "" {
				req.Header.Set("Idempotency-Key", tc.key)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tc.want, rec.Body)
			}
			if tc.want != 200 {
				if called {
					t.Fatal("the handler ran for refused input")
				}
				if !strings.Contains(rec.Body.String(), tc.mention) {
					t.Fatalf("answer %s does not name %q", rec.Body, tc.mention)
				}
				return
			}
			if !called || got != tc.body {
				t.Fatalf("handler called %v with body %q, want %q unchanged", called, got, tc.body)
			}
		})
	}
}
