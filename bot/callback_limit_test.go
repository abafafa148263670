package bot

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/config"
	"changebot/demo"
	"changebot/webhooks"
)

// TestCallbackBodyLimitIsTheConfiguredOne: the approval and deploy
// callbacks are bounded by CHANGEBOT_MAX_BODY_BYTES, as the webhooks are,
// not by a limit of their own.
func TestCallbackBodyLimitIsTheConfiguredOne(t *testing.T) {
	t.Parallel()
	const limit = 4 << 10
	env := newTestEnv(t, false, 100*time.Millisecond)
	env.Config.MaxBodyBytes = limit
	startBotOn(t, config.EngineSQLite, env, demo.Poll, &AppOpts{})
	approval := func(pad int) string {
		return `{"request_id":"cb-limit","operation_id":"op_unknown","decision":"approved","approver":"carol","ext":{"pad":"` + strings.Repeat("x", pad) + `"}}`
	}
	deploy := func(pad int) string {
		return `{"request_id":"cb-limit-` + strings.Repeat("d", pad) + `","project_id":1,"mr_iid":1,"status":"failed"}`
	}
	tooLarge := `{"error":"payload larger than 4096 bytes"}`
	tests := []struct {
		name, path, body string
		wantStatus       int
		wantBody         string // prefix of the answer
	}{
		{"approval under the limit", "/callbacks/approval", approval(10), http.StatusOK, `{"result":`},
		{"approval over the configured limit", "/callbacks/approval", approval(limit), http.StatusRequestEntityTooLarge, tooLarge},
		{"deploy over the configured limit", "/callbacks/deploy", deploy(limit), http.StatusRequestEntityTooLarge, tooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, env.BaseURL+tc.path, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			webhooks.SignRequest(req, env.Config.CallbackSecret, time.Now(), body)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantStatus || !strings.HasPrefix(strings.TrimSpace(string(got)), tc.wantBody) {
				t.Errorf("answer %d %s, want %d %s…", resp.StatusCode, got, tc.wantStatus, tc.wantBody)
			}
		})
	}
}
