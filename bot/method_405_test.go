package bot

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/demo"
)

// TestWrongMethodsAnswer405: every path the API serves answers a method it
// does not serve with 405, an Allow header listing the methods it does
// serve, and (but to HEAD, which has no body) the JSON error shape; under
// /api/v1 too, where they were 404 "no such endpoint".
func TestWrongMethodsAnswer405(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 200*time.Millisecond)
	startBot(t, env)
	tests := []struct {
		method, path, allow string
	}{
		{http.MethodPut, "/api/v1/changes", "GET, POST"},
		{http.MethodDelete, "/api/v1/changes", "GET, POST"},
		{http.MethodPatch, "/api/v1/changes", "GET, POST"},
		{http.MethodOptions, "/api/v1/changes", "GET, POST"},
		{http.MethodHead, "/api/v1/changes", "GET, POST"},
		{http.MethodDelete, "/api/v1/changes/op_x", "GET"},
		{http.MethodGet, "/api/v1/changes/x/retry", "POST"},
		{http.MethodPost, "/api/v1/changes/x/events", "GET"},
		{http.MethodDelete, "/api/v1/settings/poll.short_interval", "GET, PUT"},
		{http.MethodGet, "/callbacks/approval", "POST"},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, env.BaseURL+tt.path, nil)
		req.Header.Set("Authorization", "Bearer "+demo.OperatorToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.method, tt.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: status %d %s, want 405", tt.method, tt.path, resp.StatusCode, b)
			continue
		}
		if got := resp.Header.Get("Allow"); got != tt.allow {
			t.Errorf("%s %s: Allow %q, want %q", tt.method, tt.path, got, tt.allow)
		}
		if tt.method == http.MethodHead {
			continue
		}
		var body map[string]string
		if err := json.Unmarshal(b, &body); err != nil || !strings.Contains(body["error"], "not allowed") {
			t.Errorf("%s %s: body %q, want {\"error\": \"… not allowed …\"}", tt.method, tt.path, b)
		}
	}
}
