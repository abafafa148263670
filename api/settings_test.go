package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/mux"

	"changebot/flows/rules"
)

// failingSettings answers every write with err.
type failingSettings struct {
	*fakeSettings
	err error
}

func (f failingSettings) Set(context.Context, string, string, json.RawMessage, string) (string, error) {
	return "", f.err
}

// TestSettingsAPI: any token reads the settings in effect, globally or for
// a project; only an operator writes one, with a body {"value": …,
// "project": …} read strictly; what the settings refuse is a 400 with
// their words, an unknown key before the body is read; an accepted write
// is made as api:<role> and answered with the value now in effect; null
// goes to the settings as it is.
func TestSettingsAPI(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	tests := []struct {
		name, method, path, token, body string
		code                            int
		want                            []string
	}{
		{"get needs a token", http.MethodGet, "/api/v1/settings/flow.approval_first", "", "", 401, []string{"bearer token"}},
		{"get as a viewer", http.MethodGet, "/api/v1/settings/flow.approval_first", viewerToken, "", 200,
			[]string{`"key":"flow.approval_first"`, `"value":true`, `"source":"default"`, `"scope":"global"`, `"updated_at":null`}},
		{"get an unknown key", http.MethodGet, "/api/v1/settings/flow.aproval_first", viewerToken, "", 400, []string{`unknown setting \"flow.aproval_first\"`}},
		{"put needs an operator", http.MethodPut, "/api/v1/settings/flow.approval_first", submitterToken, `{"value":false}`, 403, []string{"operator"}},
		{"put as a viewer", http.MethodPut, "/api/v1/settings/flow.approval_first", viewerToken, `{"value":false}`, 403, []string{"operator"}},
		{"put an unknown key, the body unread", http.MethodPut, "/api/v1/settings/no.such", operatorToken, `{"value": tru`, 400, []string{`unknown setting \"no.such\"`}},
		{"put a value the settings refuse", http.MethodPut, "/api/v1/settings/admission.max_active", operatorToken, `{"value":"100"}`, 400,
			[]string{"invalid value for admission.max_active"}},
		{"put without value", http.MethodPut, "/api/v1/settings/flow.approval_first", operatorToken, `{"project":"grp/app"}`, 400, []string{`\"value\" is required`}},
		{"put malformed", http.MethodPut, "/api/v1/settings/flow.approval_first", operatorToken, `{"value": tru`, 400, []string{"malformed JSON"}},
		{"put an unknown field", http.MethodPut, "/api/v1/settings/flow.approval_first", operatorToken, `{"value":true,"scope":"global"}`, 400,
			[]string{`unknown field \"scope\"`}},
		{"put a bare value", http.MethodPut, "/api/v1/settings/pipeline.deadline", operatorToken, `"30m"`, 400, []string{"the body must be an object, not a string"}},
		{"put a key twice", http.MethodPut, "/api/v1/settings/pipeline.deadline", operatorToken, `{"value":"30m","value":"45m"}`, 400, []string{"duplicate key value"}},
		{"put a NUL", http.MethodPut, "/api/v1/settings/pipeline.deadline", operatorToken, `{"value":"a\u0000"}`, 400, []string{"NUL"}},
		{"put a project that is neither path nor id", http.MethodPut, "/api/v1/settings/pipeline.deadline", operatorToken, `{"value":"30m","project":{}}`, 400,
			[]string{"project must be a path or a numeric id"}},
		{"get with a misspelled parameter", http.MethodGet, "/api/v1/settings/pipeline.deadline?proj=42", viewerToken, "", 400,
			[]string{`unknown query parameter \"proj\"`}},
		{"list with a misspelled parameter", http.MethodGet, "/api/v1/settings?projet=a/b", viewerToken, "", 400,
			[]string{`unknown query parameter \"projet\"`}},
		{"put global", http.MethodPut, "/api/v1/settings/pipeline.deadline", operatorToken, `{"value":"90m"}`, 200,
			[]string{`"value":"90m"`, `"source":"stored"`, `"scope":"global"`, `"updated_by":"` + TokenID(operatorToken) + `"`}},
		{"put for a project by id", http.MethodPut, "/api/v1/settings/pipeline.deadline", operatorToken, `{"value":"3h","project":42}`, 200,
			[]string{`"value":"3h"`, `"scope":"project:42"`}},
		{"get the project's value", http.MethodGet, "/api/v1/settings/pipeline.deadline?project=42", viewerToken, "", 200,
			[]string{`"value":"3h"`, `"scope":"project:42"`}},
		{"another project reads the global value", http.MethodGet, "/api/v1/settings/pipeline.deadline?project=43", viewerToken, "", 200,
			[]string{`"value":"90m"`, `"scope":"global"`}},
		{"list for a project", http.MethodGet, "/api/v1/settings?project=42", viewerToken, "", 200,
			[]string{`[{"key":"admission.max_active"`, `"key":"pipeline.deadline","scope":"project:42","value":"3h"`}},
		{"null removes the project's value", http.MethodPut, "/api/v1/settings/pipeline.deadline", operatorToken, `{"value":null,"project":42}`, 200,
			[]string{`"value":"90m"`, `"scope":"global"`}},
	}
	for _, tc := range tests { // in order: later cases read what earlier ones wrote
		code, body := s.call(t, tc.method, tc.path, tc.token, tc.body)
		if code != tc.code {
			t.Errorf("%s: status %d %s, want %d", tc.name, code, body, tc.code)
			continue
		}
		for _, leak := range []string{"Go value", "Go struct", "settingRequest"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s: body %s shows Go's %q", tc.name, body, leak)
			}
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: body %s lacks %s", tc.name, body, w)
			}
		}
	}
	if len(s.settings.writes) != 2 || s.settings.writes[0].UpdatedBy != TokenID(operatorToken) || s.settings.writes[1].Scope != "project:42" {
		t.Errorf("writes %+v, want the two accepted ones, as the operator token's id", s.settings.writes)
	}
}

// TestSettingsWriteFailure: a write the settings could not make (the
// database unreachable) is a 503 saying to try again, not the settings'
// error.
func TestSettingsWriteFailure(t *testing.T) {
	t.Parallel()
	f := newFakeChanges(rules.PlatformGitLab)
	h, err := New(Config{Engine: f, Store: f, Settings: failingSettings{newFakeSettings(), errors.New("connection refused")}, Queues: newFakeQueues(f),
		Tokens: []Token{{Role: RoleOperator, Token: operatorToken}}, MaxBodyBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	r := mux.NewRouter()
	h.Mount(r)
	srv := httptest.NewServer(r)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/api/v1/settings/pipeline.deadline", strings.NewReader(`{"value":"1h"}`))
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "could not store the setting, try again") ||
		strings.Contains(string(b), "connection refused") {
		t.Errorf("answer %d %s, want 503 saying to try again", resp.StatusCode, b)
	}
}
