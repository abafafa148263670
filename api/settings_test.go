package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"changebot/settings"
)

// TestSettingsAPI: any token reads the settings in effect, globally or for
// a project; only an operator writes one, and a value settings refuses
// (unknown key, wrong type, under its minimum, project scope of a
// global-only key, a rule between two settings broken) is a 400 naming the
// key and stores nothing; an accepted write is stored as api:operator and
// answered with the value now in effect; null removes it.
func TestSettingsAPI(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	tests := []struct {
		name, method, path, token, body string
		code                            int
		want                            []string
	}{
		{"get needs a token", http.MethodGet, "/api/v1/settings/flow.approval_first", "", "", 401, []string{"bearer token"}},
		{"get a default as a viewer", http.MethodGet, "/api/v1/settings/flow.approval_first", viewerToken, "", 200,
			[]string{`"key":"flow.approval_first"`, `"value":true`, `"source":"default"`, `"scope":"global"`, `"updated_at":null`}},
		{"get an unknown key", http.MethodGet, "/api/v1/settings/flow.aproval_first", viewerToken, "", 400,
			[]string{`unknown setting \"flow.aproval_first\"`, "flow.approval_first"}},
		{"put needs an operator", http.MethodPut, "/api/v1/settings/flow.approval_first", submitterToken, `{"value":false}`, 403, []string{"operator"}},
		{"put as a viewer", http.MethodPut, "/api/v1/settings/flow.approval_first", viewerToken, `{"value":false}`, 403, []string{"operator"}},
		{"put an unknown key", http.MethodPut, "/api/v1/settings/no.such", operatorToken, `{"value":false}`, 400, []string{"unknown setting"}},
		{"put an invalid duration", http.MethodPut, "/api/v1/settings/pipeline.deadline", operatorToken, `{"value":"soon"}`, 400,
			[]string{"invalid value for pipeline.deadline", "positive duration"}},
		{"put the wrong type", http.MethodPut, "/api/v1/settings/admission.max_active", operatorToken, `{"value":"100"}`, 400,
			[]string{"invalid value for admission.max_active", "whole number"}},
		{"put without value", http.MethodPut, "/api/v1/settings/flow.approval_first", operatorToken, `{"project":"grp/app"}`, 400,
			[]string{`\"value\" is required`}},
		{"put malformed", http.MethodPut, "/api/v1/settings/flow.approval_first", operatorToken, `{"value": tru`, 400, []string{"malformed JSON"}},
		{"put an unknown field", http.MethodPut, "/api/v1/settings/flow.approval_first", operatorToken, `{"value":true,"scope":"global"}`, 400,
			[]string{`unknown field \"scope\"`}},
		{"put a bare value", http.MethodPut, "/api/v1/settings/pipeline.deadline", operatorToken, `"30m"`, 400,
			[]string{"the body must be an object, not a string"}},
		{"put a key twice", http.MethodPut, "/api/v1/settings/pipeline.deadline", operatorToken, `{"value":"30m","value":"45m"}`, 400,
			[]string{"duplicate key value"}},
		{"put a NUL", http.MethodPut, "/api/v1/settings/approval.approvers", operatorToken, `{"value":"a\u0000"}`, 400, []string{"NUL"}},
		{"put a negative count", http.MethodPut, "/api/v1/settings/poll.short_count", operatorToken, `{"value":-1}`, 400,
			[]string{"invalid value for poll.short_count", "at least 0", "got -1"}},
		{"put the reserve above the burst", http.MethodPut, "/api/v1/settings/gitlab.budget_reserve", operatorToken, `{"value":300}`, 400,
			[]string{"gitlab.budget_reserve (300) must be below gitlab.budget_burst (250) in scope global", "nothing stored"}},
		{"put a global-only key for a project", http.MethodPut, "/api/v1/settings/admission.max_active", operatorToken, `{"value":5,"project":"grp/app"}`, 400,
			[]string{"admission.max_active is global only", "project:grp/app"}},
		{"put global", http.MethodPut, "/api/v1/settings/pipeline.deadline", operatorToken, `{"value":"90m"}`, 200,
			[]string{`"value":"90m"`, `"source":"stored"`, `"scope":"global"`, `"updated_by":"api:operator"`}},
		{"put for a project in another case", http.MethodPut, "/api/v1/settings/pipeline.deadline", operatorToken, `{"value":"3h","project":"Grp/Other"}`, 200,
			[]string{`"value":"3h"`, `"scope":"project:grp/other"`}},
		{"get the project's value", http.MethodGet, "/api/v1/settings/pipeline.deadline?project=grp/other", viewerToken, "", 200,
			[]string{`"value":"3h"`, `"scope":"project:grp/other"`, `"source":"stored"`}},
		{"another project falls back to global", http.MethodGet, "/api/v1/settings/pipeline.deadline?project=grp/third", viewerToken, "", 200,
			[]string{`"value":"90m"`, `"scope":"global"`}},
		{"list for a project", http.MethodGet, "/api/v1/settings?project=GRP/OTHER", viewerToken, "", 200,
			[]string{`"key":"admission.max_active"`, `"value":"3h"`}},
		{"null removes the project's value", http.MethodPut, "/api/v1/settings/pipeline.deadline", operatorToken, `{"value":null,"project":"grp/other"}`, 200,
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
	rows, err := s.stored.ListSettings(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Key != settings.PipelineDeadline || rows[0].Scope != "global" || rows[0].UpdatedBy != "api:operator" {
		t.Errorf("stored %+v, want only the accepted global write (the project's removed, the refused never stored)", rows)
	}
}
