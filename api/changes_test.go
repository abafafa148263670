package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/rules"
	"changebot/store"
)

// validChange is a submission the API accepts; subject makes its binding
// unique.
func validChange(subject string) string {
	return `{"subject_id":"` + subject + `","target_key":"prod","project":"platform/config",` +
		`"title":"t","requested_by":"alice","files":[{"path":"a.yaml","content":"a: 1\n"}]}`
}

// TestSubmitRefusesBadInputNamingTheField: bad input is answered 400 (413
// when too large) naming the field in the API's words, never Go's, and
// reaches nothing: the engine records no submission.
func TestSubmitRefusesBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 256)
	tests := []struct {
		name string
		body string
		code int
		want []string // substrings of the answer
	}{
		{"NUL escape in subject_id", strings.Replace(validChange("nul"), `"nul"`, `"a\u0000b"`, 1), 400, []string{`"field":"subject_id"`, "NUL"}},
		{"invalid UTF-8 in title", strings.Replace(validChange("utf"), `"title":"t"`, "\"title\":\"t\xff\xfe\"", 1), 400, []string{"UTF-8"}},
		{"lone surrogate escape in description", strings.Replace(validChange("sur"), `"title":"t"`, `"title":"t","description":"\ud800"`, 1), 400,
			[]string{`"field":"description"`, "UTF-8"}},
		{"invalid UTF-8 in project", strings.Replace(validChange("utfp"), `"project":"`, "\"project\":\"\xff", 1), 400, []string{"UTF-8"}},
		{"subject_id too long", validChange(long), 400, []string{`"field":"subject_id"`, "255"}},
		{"requested_by with a space", strings.Replace(validChange("rbs"), `"alice"`, `"alice smith"`, 1), 400, []string{`"field":"requested_by"`, "GitLab username"}},
		{"subject_id of the wrong type", strings.Replace(validChange("x"), `"x"`, `42`, 1), 400, []string{"subject_id", "string"}},
		{"file path of the wrong type", strings.Replace(validChange("fp"), `"path":"a.yaml"`, `"path":7`, 1), 400,
			[]string{"field files[0].path must be a string, not a number"}},
		{"file without content or action", strings.Replace(validChange("fc"), `{"path":"a.yaml","content":"a: 1\n"}`, `{"path":"a.yaml"}`, 1), 400,
			[]string{`"field":"files[0].content"`, "required"}},
		{"unknown field", strings.Replace(validChange("uf"), `"title":"t"`, `"title":"t","titel":"u"`, 1), 400, []string{`unknown field \"titel\"`}},
		{"subject_id twice", strings.Replace(validChange("g4"), `"subject_id":"g4"`, `"subject_id":"g4","subject_id":"g5"`, 1), 400, []string{"duplicate key subject_id"}},
		{"a stray brace after the body", validChange("sb") + " }", 400, []string{"data after the JSON value"}},
		{"body not an object", `["x"]`, 400, []string{"the body must be an object, not an array"}},
		{"project neither path nor id", strings.Replace(validChange("pj"), `"project":"platform/config"`, `"project":{}`, 1), 400,
			[]string{"project must be a path or a numeric id"}},
		{"body over the limit", `{"subject_id":"` + strings.Repeat("x", 1<<20) + `"}`, 413, []string{"body larger than 1048576 bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "")
			code, body := s.call(t, http.MethodPost, "/api/v1/changes", submitterToken, tc.body)
			if code != tc.code {
				t.Fatalf("status %d %s, want %d", code, body, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("body %s does not contain %q", body, w)
				}
			}
			for _, leak := range []string{"Go struct", "Go value", "changeRequest", "fileRequest", "jsonText", "try again"} {
				if strings.Contains(body, leak) {
					t.Errorf("body %s contains %q", body, leak)
				}
			}
			if len(s.changes.submitted) != 0 {
				t.Errorf("the engine got %d submissions, want none", len(s.changes.submitted))
			}
		})
	}
}

// TestSubmitAnswers: what the engine answers a submission becomes the
// API's status, headers and body: 202 with the change's status_url, 200
// for the same Idempotency-Key again, 409 for a binding another change
// holds, 422 for what the platform's checks refuse or a key reused with
// another body, 503 with Retry-After when admission control or the
// platform refuses for now; the token decides who may submit.
func TestSubmitAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		platform   string
		token      string
		submitErr  error
		first      bool // submit validChange("svc") once before, with key k1
		key        string
		wantCode   int
		wantBody   []string
		retryAfter string
	}{
		{name: "accepted", token: submitterToken, wantCode: 202, wantBody: []string{`"operation_id":"op_`, `"status_url":"` + externalURL + `/api/v1/changes/op_`}},
		{name: "an operator submits too", token: operatorToken, wantCode: 202},
		{name: "no token", wantCode: 401, wantBody: []string{"missing or invalid bearer token"}},
		{name: "a viewer only reads", token: viewerToken, wantCode: 403, wantBody: []string{"a viewer token only reads"}},
		{name: "the same key again", token: submitterToken, first: true, key: "k1", wantCode: 200},
		{name: "the binding is held", token: submitterToken, first: true, key: "k2", wantCode: 409,
			wantBody: []string{"the binding has a change in progress", `"status":"APPROVAL_SENDING"`, `"failed":false`}},
		{name: "overloaded", token: submitterToken, submitErr: flows.ErrOverloaded, wantCode: 503, retryAfter: "30",
			wantBody: []string{"admission.max_active", `"retry_after_seconds":30`}},
		{name: "the platform's checks refuse", token: submitterToken, submitErr: &flows.GitLabCheckError{Fields: []flows.FieldError{{Field: "target_branch", Message: "does not exist"}}},
			wantCode: 422, wantBody: []string{"does not fit the project in GitLab", `"field":"target_branch"`}},
		{name: "GitHub's checks refuse", platform: store.PlatformGitHub, token: submitterToken,
			submitErr: &flows.GitLabCheckError{Fields: []flows.FieldError{{Field: "project", Message: "not found"}}}, wantCode: 422,
			wantBody: []string{"does not fit the project in GitHub"}},
		{name: "the platform is down", token: submitterToken, submitErr: &flows.GitLabUnavailableError{RetryAfter: 5 * time.Second, Err: errors.New("502")},
			wantCode: 503, retryAfter: "5", wantBody: []string{"GitLab could not answer the checks", `"retry_after_seconds":5`}},
		{name: "the platform is down without a wait", token: submitterToken, submitErr: &flows.GitLabUnavailableError{Err: errors.New("timeout")},
			wantCode: 503, retryAfter: "30"},
		{name: "a key reused with another body", token: submitterToken,
			submitErr: &flows.IdempotencyConflictError{Key: "k", OperationID: "op_1", Fields: []string{"title"}}, wantCode: 422,
			wantBody: []string{`"operation_id":"op_1"`, `"differing_fields":["title"]`}},
		{name: "the store fails", token: submitterToken, submitErr: errors.New("connection reset"), wantCode: 503,
			wantBody: []string{"could not store the change, try again"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, tc.platform)
			var firstID string
			if tc.first {
				code, body, _ := s.callWith(t, http.MethodPost, "/api/v1/changes", submitterToken, validChange("svc"), map[string]string{"Idempotency-Key": "k1"})
				if code != 202 {
					t.Fatalf("first submission: %d %s", code, body)
				}
				firstID = s.changes.byKey["k1"]
			}
			s.changes.submitErr = tc.submitErr
			hdr := map[string]string{}
			if tc.key != "" {
				hdr["Idempotency-Key"] = tc.key
			}
			code, body, h := s.callWith(t, http.MethodPost, "/api/v1/changes", tc.token, validChange("svc"), hdr)
			if code != tc.wantCode {
				t.Fatalf("status %d %s, want %d", code, body, tc.wantCode)
			}
			for _, w := range tc.wantBody {
				if !strings.Contains(body, w) {
					t.Errorf("body %s does not contain %q", body, w)
				}
			}
			if got := h.Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			if firstID != "" && !strings.Contains(body, firstID) {
				t.Errorf("body %s does not name the first change %s", body, firstID)
			}
		})
	}
}

// TestSubmitPassesWhoAndHow: the submission reaches the engine with the
// platform, the Idempotency-Key, the submitting token's id (never the
// token) and the settings' admission limit.
func TestSubmitPassesWhoAndHow(t *testing.T) {
	t.Parallel()
	s := setup(t, store.PlatformGitHub)
	if err := s.settings.Set(t.Context(), "admission.max_active", "", json.RawMessage(`7`), "test"); err != nil {
		t.Fatal(err)
	}
	code, body, _ := s.callWith(t, http.MethodPost, "/api/v1/changes", submitterToken, validChange("svc"), map[string]string{"Idempotency-Key": "key-1"})
	if code != 202 {
		t.Fatalf("submit: %d %s", code, body)
	}
	if len(s.changes.submitted) != 1 {
		t.Fatalf("%d submissions reached the engine, want 1", len(s.changes.submitted))
	}
	p := s.changes.submitted[0]
	if p.Platform != store.PlatformGitHub || p.IdempotencyKey != "key-1" || p.SubmittedBy != tokenID(submitterToken) ||
		strings.Contains(p.SubmittedBy, submitterToken) || p.MaxActive != 7 || p.SubjectID != "svc" || len(p.Files) != 1 {
		t.Errorf("the engine got %+v", p)
	}
	if p.ApprovalFirstFunc == nil || !p.ApprovalFirstFunc("platform/config") {
		t.Error("ApprovalFirstFunc does not read flow.approval_first (default true)")
	}
}

// TestGetChange: GET /api/v1/changes/{id} answers the change's view (its
// hint naming the API's actions while it has no merge request, and the
// refused approval callbacks while it waits in APPROVAL_SENT), 404 for an
// unknown id, 503 when the engine cannot read; its events come in the
// form asked for.
func TestGetChange(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	failed := s.changes.add(store.Operation{SubjectID: "a", TargetKey: "prod", Status: store.StatusCreateFailed, Step: int(rules.CreateFailed)}, "")
	withMR := s.changes.add(store.Operation{SubjectID: "b", TargetKey: "prod", Status: store.StatusMerging, Step: int(rules.HandleStarted),
		ProjectID: 7, MRIID: 12, MRWebURL: "https://gitlab.example/p/-/merge_requests/12"}, "")
	waiting := s.changes.add(store.Operation{SubjectID: "c", TargetKey: "prod", Status: store.StatusApprovalSent, Step: int(rules.ApprovalSent), MRIID: 3}, "")
	s.refusals.Refused()
	tests := []struct {
		name, path string
		code       int
		want       []string
		not        []string
	}{
		{"failed without MR", "/api/v1/changes/" + failed, 200,
			[]string{`"status":"CREATE_FAILED"`, `"name":"CREATE_FAILED"`, `"merge_request":null`, externalURL + "/api/v1/changes/" + failed + "/retry", `"terminal":false`},
			[]string{"comment"}},
		{"with its MR", "/api/v1/changes/" + withMR, 200,
			[]string{`"merge_request":{"project_id":7,"iid":12,"web_url":"https://gitlab.example/p/-/merge_requests/12"}`, `"events":[{`}, []string{"/retry"}},
		{"waiting while callbacks are refused", "/api/v1/changes/" + waiting, 200,
			[]string{"1 approval callback was refused for a bad signature", "callback_secret"}, nil},
		{"unknown", "/api/v1/changes/op_none", 404, []string{"no change with id op_none"}, nil},
		{"events as read", "/api/v1/changes/" + failed + "/events", 200, []string{`"form":"current"`, `"type":"submitted"`}, nil},
		{"events as stored", "/api/v1/changes/" + failed + "/events?form=stored", 200, []string{`"form":"stored"`}, nil},
		{"events in no such form", "/api/v1/changes/" + failed + "/events?form=raw", 400, []string{`form must be current or stored, not \"raw\"`}, nil},
		{"events of an unknown change", "/api/v1/changes/op_none/events", 404, []string{"no change with id op_none"}, nil},
	}
	for _, tc := range tests {
		code, body := s.call(t, http.MethodGet, tc.path, viewerToken, "")
		if code != tc.code {
			t.Errorf("%s: status %d %s, want %d", tc.name, code, body, tc.code)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: body %s does not contain %q", tc.name, body, w)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(body, w) {
				t.Errorf("%s: body %s contains %q", tc.name, body, w)
			}
		}
	}
	s.changes.err = errors.New("database down")
	if code, body := s.call(t, http.MethodGet, "/api/v1/changes/"+failed, viewerToken, ""); code != 503 || !strings.Contains(body, "could not read the change") {
		t.Errorf("engine down: %d %s, want 503", code, body)
	}
}

// TestChangeActionsNeedTheirRole: retry and resume need an operator token;
// cancel also takes the submitter token that submitted the change (never
// another one, nor a viewer's); an action that does not apply is a 409 with
// the engine's reason, an unknown change a 404. Only allowed actions reach
// the engine, with the token's role as actor.
func TestChangeActionsNeedTheirRole(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status string
		step   rules.StepCode
		owner  string // token that submitted the change
		action string
		token  string
		code   int
		want   string
		acted  bool
	}{
		{"retry by an operator", store.StatusCreateFailed, rules.CreateFailed, submitterToken, "retry", operatorToken, 200, `"status":"MR_CREATING"`, true},
		{"retry by its submitter", store.StatusCreateFailed, rules.CreateFailed, submitterToken, "retry", submitterToken, 403, "this needs an operator token", false},
		{"resume by a viewer", store.StatusCreateFailed, rules.CreateFailed, submitterToken, "resume", viewerToken, 403, "this needs an operator token", false},
		{"resume of a failed change", store.StatusCreateFailed, rules.CreateFailed, submitterToken, "resume", operatorToken, 409, "cannot resume", true},
		{"resume of a parked change", store.StatusApprovalSending, rules.ApprovalSendPending, submitterToken, "resume", operatorToken, 200, `"operation_id"`, true},
		{"cancel by its submitter", store.StatusApprovalSent, rules.ApprovalSent, submitterToken, "cancel", submitterToken, 200, `"status":"CLOSED"`, true},
		{"cancel by another submitter", store.StatusApprovalSent, rules.ApprovalSent, submitterToken, "cancel", otherToken, 403, "only the changes it submitted", false},
		{"cancel of a change no token submitted", store.StatusApprovalSent, rules.ApprovalSent, "", "cancel", submitterToken, 403, "only the changes it submitted", false},
		{"cancel by a viewer", store.StatusApprovalSent, rules.ApprovalSent, submitterToken, "cancel", viewerToken, 403, "only the changes it submitted", false},
		{"cancel by an operator", store.StatusApprovalSent, rules.ApprovalSent, submitterToken, "cancel", operatorToken, 200, `"status":"CLOSED"`, true},
		{"cancel of a closed change", store.StatusClosed, rules.Closed, submitterToken, "cancel", operatorToken, 409, "cannot cancel", true},
		{"no token", store.StatusCreateFailed, rules.CreateFailed, submitterToken, "retry", "", 401, "bearer token", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "")
			owner := ""
			if tc.owner != "" {
				owner = tokenID(tc.owner)
			}
			id := s.changes.add(store.Operation{SubjectID: "svc", TargetKey: "prod", Status: tc.status, Step: int(tc.step)}, owner)
			code, body := s.call(t, http.MethodPost, "/api/v1/changes/"+id+"/"+tc.action, tc.token, "")
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("status %d %s, want %d with %q", code, body, tc.code, tc.want)
			}
			if acted := len(s.changes.acts) > 0; acted != tc.acted {
				t.Fatalf("the engine was asked %v, want asked: %v", s.changes.acts, tc.acted)
			}
			if tc.acted {
				a := s.changes.acts[0]
				role := map[string]string{operatorToken: RoleOperator, submitterToken: RoleSubmitter}[tc.token]
				if string(a.Action) != tc.action || a.Params.Actor != "api:"+role || a.Params.Source != "api" {
					t.Errorf("the engine got %+v, want %s by api:%s from api", a, tc.action, role)
				}
			}
		})
	}
	s := setup(t, "")
	for _, token := range []string{operatorToken, submitterToken} {
		if code, body := s.call(t, http.MethodPost, "/api/v1/changes/op_none/cancel", token, ""); code != 404 {
			t.Errorf("cancel of an unknown change with %s: %d %s, want 404", token, code, body)
		}
	}
}

// TestWrongMethodsAnswer405: every path the bot serves answers a method it
// does not serve with 405, an Allow header listing the methods it does
// serve and (but to HEAD, which has no body) the JSON error shape, under
// /api/v1 too and for a route the caller mounted on the root (a
// callback); a path no route serves is a 404 in the same shape, a plain
// page under /ui/.
func TestWrongMethodsAnswer405(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	tests := []struct {
		method, path string
		code         int
		allow        string
	}{
		{http.MethodPut, "/api/v1/changes", 405, "GET, POST"},
		{http.MethodDelete, "/api/v1/changes", 405, "GET, POST"},
		{http.MethodPatch, "/api/v1/changes", 405, "GET, POST"},
		{http.MethodOptions, "/api/v1/changes", 405, "GET, POST"},
		{http.MethodHead, "/api/v1/changes", 405, "GET, POST"},
		{http.MethodDelete, "/api/v1/changes/op_x", 405, "GET"},
		{http.MethodGet, "/api/v1/changes/x/retry", 405, "POST"},
		{http.MethodPost, "/api/v1/changes/x/events", 405, "GET"},
		{http.MethodDelete, "/api/v1/settings/poll.short_interval", 405, "GET, PUT"},
		{http.MethodGet, "/callbacks/approval", 405, "POST"},
		{http.MethodPut, "/ui/login", 405, "GET, POST"},
		{http.MethodGet, "/api/v1/nothing", 404, ""},
		{http.MethodGet, "/nothing", 404, ""},
	}
	for _, tt := range tests {
		code, body, h := s.callWith(t, tt.method, tt.path, operatorToken, "", nil)
		if code != tt.code {
			t.Errorf("%s %s: status %d %s, want %d", tt.method, tt.path, code, body, tt.code)
			continue
		}
		if got := h.Get("Allow"); got != tt.allow {
			t.Errorf("%s %s: Allow %q, want %q", tt.method, tt.path, got, tt.allow)
		}
		if tt.method == http.MethodHead {
			continue
		}
		want := map[int]string{405: "not allowed", 404: "no such endpoint"}[tt.code]
		var errBody map[string]string
		if err := json.Unmarshal([]byte(body), &errBody); err != nil || !strings.Contains(errBody["error"], want) {
			t.Errorf("%s %s: body %q, want {\"error\": \"… %s …\"}", tt.method, tt.path, body, want)
		}
	}
	if code, body := s.call(t, http.MethodGet, "/ui/nothing", "", ""); code != 404 || strings.Contains(body, `"error"`) {
		t.Errorf("GET /ui/nothing: %d %q, want a plain 404 page", code, body)
	}
}

// TestAuthSchemes: the bearer scheme is matched in any case, a token in
// any other scheme or none is refused.
func TestAuthSchemes(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	for _, tc := range []struct {
		auth string
		code int
	}{
		{"Bearer " + viewerToken, 200}, {"bearer " + viewerToken, 200}, {"BEARER  " + viewerToken, 200},
		{"Token " + viewerToken, 401}, {viewerToken, 401}, {"Bearer " + viewerToken + "x", 401}, {"Bearer", 401},
	} {
		code, body, _ := s.callWith(t, http.MethodGet, "/api/v1/settings", "", "", map[string]string{"Authorization": tc.auth})
		if code != tc.code {
			t.Errorf("Authorization %q: %d %s, want %d", tc.auth, code, body, tc.code)
		}
	}
}

// opsFixture adds n changes of project p in status st to s and returns
// their ids in the order added (ids grow: the last is the newest).
func opsFixture(s *apiSetup, n int, p, st string, step rules.StepCode) []string {
	var ids []string
	for i := range n {
		ids = append(ids, s.changes.add(store.Operation{SubjectID: fmt.Sprintf("%s-%d", p, i), TargetKey: "prod", Project: p,
			Status: st, Step: int(step), RequestedBy: "alice"}, ""))
	}
	return ids
}
