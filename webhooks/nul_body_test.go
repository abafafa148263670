package webhooks

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// TestIntakePostgresStoresNULEscape sends a note whose JSON carries the
// escape \u0000 (which PostgreSQL's jsonb refuses, SQLSTATE 22P05) through
// the real handler and store: it is accepted (never 503, which GitLab
// would repeat until it disabled the hook) and stored byte for byte.
func TestIntakePostgresStoresNULEscape(t *testing.T) {
	t.Parallel()
	h, pool := newPostgresHandler(t, nil)
	fixture := readFixture(t, "webhook-note-mr.json")
	body := bytes.Replace(fixture, []byte(`"This MR needs work."`), []byte(`"/retry\nThis MR\u0000 needs work."`), 1)
	if bytes.Equal(body, fixture) {
		t.Fatal("fixture note not found")
	}
	w := serve(h, delivery{event: evNote, token: secretA, idemKey: "nul-escape-1", body: body})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"result":"accepted"`) {
		t.Fatalf("answer %d %s, want 200 accepted", w.Code, w.Body.String())
	}
	var stored []byte
	if err := pool.QueryRow(t.Context(), `SELECT body FROM webhook_deliveries WHERE dedupe_key = 'idem:nul-escape-1'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stored, body) {
		t.Errorf("stored body differs from the one sent:\n got %q\nwant %q", stored, body)
	}
}
