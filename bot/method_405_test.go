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

// TestBotRoutesAnswer405: the bot mounts the API's fallback on its own
// router, so its intake routes answer a method they do not serve as the
// API's do: 405, an Allow header and (but to HEAD) the JSON error shape
// (api's TestWrongMethodsAnswer405 holds every API path).
func TestBotRoutesAnswer405(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 200*time.Millisecond)
	startBot(t, env)
	tests := []struct {
		method, path, allow string
	}{
		{http.MethodPut, "/api/v1/changes", "GET, POST"},
		{http.MethodHead, "/api/v1/changes", "GET, POST"},
		{http.MethodGet, "/webhooks/gitlab", "POST"},
		{http.MethodGet, "/callbacks/deploy", "POST"},
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
