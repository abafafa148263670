package bot

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/webhooks"
)

// TestAPIErrorsHaveOneShape: every 4xx of the HTTP API is a JSON object
// with "error" and only the keys openapi.json's Error schema lists: an
// unknown path (it was the router's plain-text "404 page not found"), a
// method a path does not serve (an empty 405), and a callback's invalid
// fields, listed as "fields" of {field, message} like a submission's (they
// were "problems" of {field, problem}).
func TestAPIErrorsHaveOneShape(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 200*time.Millisecond)
	startBot(t, env)

	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	allowed := doc.Components.Schemas["Error"].Properties
	if len(allowed) == 0 {
		t.Fatal("openapi.json has no Error schema")
	}

	badCallback := `{"request_id":"r-1","project_id":0,"mr_iid":7,"status":"maybe"}`
	tests := []struct {
		name, method, path, body string
		signed                   bool
		wantStatus               int
		wantFields               []string // field names of "fields", in order
	}{
		{name: "unknown API path", method: http.MethodGet, path: "/api/v1/nope", wantStatus: http.StatusNotFound},
		{name: "unknown path", method: http.MethodGet, path: "/nope", wantStatus: http.StatusNotFound},
		{name: "method not served", method: http.MethodGet, path: "/callbacks/deploy", wantStatus: http.StatusMethodNotAllowed},
		{name: "method not served under /api/v1", method: http.MethodDelete, path: "/api/v1/changes/op_x", wantStatus: http.StatusMethodNotAllowed},
		{name: "unknown change", method: http.MethodGet, path: "/api/v1/changes/op_x", wantStatus: http.StatusNotFound},
		{name: "callback with invalid fields", method: http.MethodPost, path: "/callbacks/deploy", body: badCallback, signed: true,
			wantStatus: http.StatusBadRequest, wantFields: []string{"project_id", "status"}},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, env.BaseURL+tt.path, strings.NewReader(tt.body))
		req.Header.Set("Authorization", "Bearer "+demo.OperatorToken)
		if tt.signed {
			webhooks.SignRequest(req, demo.CallbackSecret, time.Now(), []byte(tt.body))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 || (tt.wantStatus != 0 && resp.StatusCode != tt.wantStatus) {
			t.Errorf("%s: status %d, want %d", tt.name, resp.StatusCode, tt.wantStatus)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q, want application/json (body %q)", tt.name, ct, b)
			continue
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("%s: body %q is not a JSON object: %v", tt.name, b, err)
			continue
		}
		var msg string
		if err := json.Unmarshal(got["error"], &msg); err != nil || msg == "" {
			t.Errorf("%s: body %s has no error text", tt.name, b)
		}
		for k := range got {
			if _, ok := allowed[k]; !ok {
				t.Errorf("%s: body %s has %q, which openapi.json's Error does not list", tt.name, b, k)
			}
		}
		if tt.wantFields == nil {
			continue
		}
		var fields []map[string]string
		if err := json.Unmarshal(got["fields"], &fields); err != nil {
			t.Errorf("%s: fields of %s: %v", tt.name, b, err)
			continue
		}
		var names []string
		for _, f := range fields {
			if f["message"] == "" || len(f) != 2 {
				t.Errorf("%s: field %v, want {field, message}", tt.name, f)
			}
			names = append(names, f["field"])
		}
		if !slices.Equal(names, tt.wantFields) {
			t.Errorf("%s: fields %v, want %v", tt.name, names, tt.wantFields)
		}
	}
}
