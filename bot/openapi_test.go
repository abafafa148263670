package bot

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"changebot/api"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestOpenAPIDocumentServed (issue 13 point 4): the bot serves its OpenAPI
// 3.1 document at GET /api/v1/openapi.json without a token, byte for byte the
// embedded api/openapi.json, and that exchange itself is validated.
func TestOpenAPIDocumentServed(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 0)
	startBot(t, env)
	before := openAPIValidator.checked.Load()
	resp, err := http.Get(env.BaseURL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, api.OpenAPIDocument()) {
		t.Fatalf("GET /api/v1/openapi.json = %d %q, %d bytes; want 200 application/json, the embedded document", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	spec, err := openapi3.NewLoader().LoadFromData(body)
	if err != nil || spec.OpenAPI != "3.1.0" || !spec.IsOpenAPI31OrLater() {
		t.Fatalf("served document: version %q, %v; want OpenAPI 3.1.0", spec.OpenAPI, err)
	}
	if openAPIValidator.checked.Load() == before {
		t.Error("the exchange was not validated against the document")
	}
}

// TestOpenAPIRoundTripperCatchesDrift (issue 13 point 4): the validating
// round tripper of the e2e tests fails a request the document lacks, a
// request the document refuses that a server accepts, an answer whose body
// or status the document does not describe; it passes a documented
// exchange and a refusal of what the document lacks.
func TestOpenAPIRoundTripperCatchesDrift(t *testing.T) {
	t.Parallel()
	change := `{"operation_id":"op_1","title":"t","subject_id":"s","target_key":"k","project":"g/p","status":"MERGING",` +
		`"step":{"code":10101,"name":"HANDLE_STARTED"},"hint":"h","terminal":false,"merge_request":null,"requested_by":"alice",` +
		`"created_at":"2026-12-01T10:00:00Z","updated_at":"2026-12-01T10:00:00Z","step_started_at":"2026-12-01T10:00:00Z",` +
		`"files":[{"path":"a","action":"create_or_update","size":1,"sha256":"` + strings.Repeat("0", 64) + `"}],"events":[],"approval_first":true}`
	valid := `{"subject_id":"s","target_key":"k","project":"g/p","title":"t","requested_by":"alice","files":[{"path":"a","content":"b"}]}`
	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		status  int    // the fake bot's answer
		answer  string // its body
		wantErr string // "" when the exchange is valid
	}{
		{name: "documented exchange", method: http.MethodGet, path: "/api/v1/changes/op_1", status: 200, answer: change},
		{name: "documented submission", method: http.MethodPost, path: "/api/v1/changes", body: valid, status: 202,
			answer: `{"operation_id":"op_1","status_url":"http://x/api/v1/changes/op_1"}`},
		{name: "request missing from the document", method: http.MethodGet, path: "/api/v1/changes/op_1/timeline", status: 200, answer: `{}`,
			wantErr: "is not in the document"},
		{name: "method missing from the document", method: http.MethodDelete, path: "/api/v1/changes/op_1", status: 200, answer: change,
			wantErr: "is not in the document"},
		{name: "undocumented request refused by the bot", method: http.MethodGet, path: "/api/v1/nothing", status: 404, answer: `{"error":"no"}`},
		{name: "request the document refuses, accepted", method: http.MethodPost, path: "/api/v1/changes", body: `{"subject_id":"s"}`, status: 202,
			answer: `{"operation_id":"op_1","status_url":"u"}`, wantErr: "the document refuses"},
		{name: "request the document refuses, refused", method: http.MethodPost, path: "/api/v1/changes", body: `{"subject_id":"s"}`, status: 400,
			answer: `{"error":"invalid change","fields":[{"field":"title","message":"is required"}]}`},
		{name: "answer with a field the document lacks", method: http.MethodGet, path: "/api/v1/changes/op_1", status: 200,
			answer: strings.Replace(change, `"hint":"h"`, `"hint":"h","colour":"red"`, 1), wantErr: "does not match the document"},
		{name: "error answer without its sentence", method: http.MethodGet, path: "/api/v1/changes/op_2", status: 404, answer: `{"message":"no"}`,
			wantErr: "does not match the document"},
		{name: "undocumented status", method: http.MethodGet, path: "/api/v1/changes/op_1", status: http.StatusTeapot, answer: `{"error":"tea"}`,
			wantErr: "does not match the document"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.answer)
			}))
			defer srv.Close()
			rt, err := newOpenAPIRoundTripper(api.OpenAPIDocument(), &http.Transport{})
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequestWithContext(context.Background(), tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer x")
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := (&http.Client{Transport: rt}).Do(req)
			if resp != nil {
				_ = resp.Body.Close()
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("a valid exchange failed validation: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if got := len(rt.Violations()); (got > 0) != (tc.wantErr != "") {
				t.Errorf("%d violations recorded, want some: %v", got, tc.wantErr != "")
			}
		})
	}
}
