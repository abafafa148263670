package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"changebot/flows/rules"
)

// validChange is a submission the API accepts; subject makes its binding
// unique.
func validChange(subject string) string {
	return `{"subject_id":"` + subject + `","target_key":"prod","project":"platform/config",` +
		`"title":"t","requested_by":"alice","files":[{"path":"a.yaml","content":"a: 1\n"}]}`
}

// TestSubmitRefusesBadInputNamingTheField: a body the API cannot read as
// a submission is answered 400 (413 when too large) naming the field in
// the API's words, never Go's, and reaches nothing: the engine records no
// submission. What the engine's checks refuse is a 400 naming its fields,
// listed after and once with the API's own (invalid UTF-8).
func TestSubmitRefusesBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		body     string
		problems map[string]string // the engine's
		code     int
		want     []string // substrings of the answer, in order
	}{
		{name: "invalid UTF-8 in title", body: strings.Replace(validChange("utf"), `"title":"t"`, "\"title\":\"t\xff\xfe\"", 1), code: 400,
			want: []string{`{"field":"title","message":"is not valid UTF-8"}`}},
		{name: "lone surrogate escape in description", body: strings.Replace(validChange("sur"), `"title":"t"`, `"title":"t","description":"\ud800"`, 1), code: 400,
			want: []string{`"field":"description"`, "UTF-8"}},
		{name: "invalid UTF-8 in a file's content", body: strings.Replace(validChange("utfc"), `a: 1\n`, "a: \xc3\x28", 1), code: 400,
			want: []string{`"field":"files[0].content"`, "UTF-8"}},
		{name: "invalid UTF-8 in project", body: strings.Replace(validChange("utfp"), `"project":"`, "\"project\":\"\xff", 1), code: 400,
			want: []string{"project is not valid UTF-8"}},
		{name: "the engine's problems after the API's, each field once", body: strings.Replace(validChange("both"), `"title":"t"`, "\"title\":\"t\xff\"", 1),
			problems: map[string]string{"title": "contains a control character", "subject_id": "is longer than 255 bytes"}, code: 400,
			want: []string{`{"field":"title","message":"is not valid UTF-8"}`, `{"field":"subject_id","message":"is longer than 255 bytes"}`}},
		{name: "the engine's problems alone", body: validChange("eng"), problems: map[string]string{"requested_by": "is not a GitLab username"}, code: 400,
			want: []string{`"error":"invalid change"`, `{"field":"requested_by","message":"is not a GitLab username"}`}},
		{name: "subject_id of the wrong type", body: strings.Replace(validChange("x"), `"x"`, `42`, 1), code: 400, want: []string{"subject_id", "string"}},
		{name: "file path of the wrong type", body: strings.Replace(validChange("fp"), `"path":"a.yaml"`, `"path":7`, 1), code: 400,
			want: []string{"field files[0].path must be a string, not a number"}},
		{name: "file without content or action", body: strings.Replace(validChange("fc"), `{"path":"a.yaml","content":"a: 1\n"}`, `{"path":"a.yaml"}`, 1), code: 400,
			want: []string{`"field":"files[0].content"`, "required"}},
		{name: "update with null content", body: strings.Replace(validChange("fn"), `"content":"a: 1\n"`, `"content":null,"action":"update"`, 1), code: 400,
			want: []string{`"field":"files[0].content"`, "required"}},
		{name: "unknown field", body: strings.Replace(validChange("uf"), `"title":"t"`, `"title":"t","titel":"u"`, 1), code: 400, want: []string{`unknown field \"titel\"`}},
		{name: "subject_id twice", body: strings.Replace(validChange("g4"), `"subject_id":"g4"`, `"subject_id":"g4","subject_id":"g5"`, 1), code: 400,
			want: []string{"duplicate key subject_id"}},
		{name: "a stray brace after the body", body: validChange("sb") + " }", code: 400, want: []string{"data after the JSON value"}},
		{name: "body not an object", body: `["x"]`, code: 400, want: []string{"the body must be an object, not an array"}},
		{name: "project neither path nor id", body: strings.Replace(validChange("pj"), `"project":"platform/config"`, `"project":{}`, 1), code: 400,
			want: []string{"project must be a path or a numeric id"}},
		{name: "a NUL escape", body: strings.Replace(validChange("nul"), `"nul"`, `"a\u0000b"`, 1), problems: map[string]string{"subject_id": "contains a NUL"}, code: 400,
			want: []string{`"field":"subject_id"`, "NUL"}},
		{name: "body over the limit", body: `{"subject_id":"` + strings.Repeat("x", 1<<20) + `"}`, code: 413, want: []string{"body larger than 1048576 bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "")
			maps.Copy(s.changes.problems, tc.problems)
			code, body := s.call(t, http.MethodPost, "/api/v1/changes", submitterToken, tc.body)
			if code != tc.code {
				t.Fatalf("status %d %s, want %d", code, body, tc.code)
			}
			at := 0
			for _, w := range tc.want {
				i := strings.Index(body[at:], w)
				if i < 0 {
					t.Fatalf("body %s does not contain %q (after what came before)", body, w)
				}
				at += i + len(w)
			}
			for field := range tc.problems {
				if n := strings.Count(body, `"field":"`+field+`"`); n != 1 {
					t.Errorf("body %s names %s %d times, want once", body, field, n)
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
			wantBody: []string{"already has an open change", `"status":"APPROVAL_SENDING"`, `"failed":false`}},
		{name: "overloaded", token: submitterToken, submitErr: ErrOverloaded, wantCode: 503, retryAfter: "30",
			wantBody: []string{"admission.max_active", `"retry_after_seconds":30`}},
		{name: "the platform's checks refuse", token: submitterToken, submitErr: &CheckError{Fields: []FieldError{{Field: "target_branch", Message: "does not exist"}}},
			wantCode: 422, wantBody: []string{"does not fit the project in GitLab", `"field":"target_branch"`}},
		{name: "GitHub's checks refuse", platform: rules.PlatformGitHub, token: submitterToken,
			submitErr: &CheckError{Fields: []FieldError{{Field: "project", Message: "not found"}}}, wantCode: 422,
			wantBody: []string{"does not fit the project in GitHub"}},
		{name: "the platform is down", token: submitterToken, submitErr: &UnavailableError{RetryAfter: 5 * time.Second, Err: errors.New("502")},
			wantCode: 503, retryAfter: "5", wantBody: []string{"GitLab could not answer the checks", `"retry_after_seconds":5`}},
		{name: "the platform is down without a wait", token: submitterToken, submitErr: &UnavailableError{Err: errors.New("timeout")},
			wantCode: 503, retryAfter: "30"},
		{name: "a key reused with another body", token: submitterToken,
			submitErr: &IdempotencyConflictError{OperationID: "op_1", Fields: []string{"title"}, Message: "Idempotency-Key k was used for op_1 with another title"}, wantCode: 422,
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

// TestSubmitPassesWhoAndHow: the submission reaches the engine as sent,
// with the Idempotency-Key and the submitting token's id (never the
// token).
func TestSubmitPassesWhoAndHow(t *testing.T) {
	t.Parallel()
	s := setup(t, rules.PlatformGitHub)
	body := `{"subject_id":"svc","target_key":"prod","project":42,"target_branch":"main","title":"t","description":"d",` +
		`"requested_by":"alice","files":[{"path":"a.yaml","content":""},{"path":"b.yaml","action":"delete"}]}`
	code, answer, _ := s.callWith(t, http.MethodPost, "/api/v1/changes", submitterToken, body, map[string]string{"Idempotency-Key": "key-1"})
	if code != 202 {
		t.Fatalf("submit: %d %s", code, answer)
	}
	want := Submission{SubjectID: "svc", TargetKey: "prod", Project: "42", TargetBranch: "main", Title: "t", Description: "d",
		RequestedBy: "alice", Files: []File{{Path: "a.yaml"}, {Path: "b.yaml", Action: "delete"}}, IdempotencyKey: "key-1",
		SubmittedBy: TokenID(submitterToken)}
	if len(s.changes.submitted) != 1 || !reflect.DeepEqual(s.changes.submitted[0], want) {
		t.Fatalf("the engine got %+v, want %+v", s.changes.submitted, want)
	}
	if strings.Contains(want.SubmittedBy, submitterToken) || !strings.HasPrefix(want.SubmittedBy, "api:") {
		t.Errorf("SubmittedBy %q names the token", want.SubmittedBy)
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
	failed := s.changes.add(Change{SubjectID: "a", TargetKey: "prod", Status: rules.StatusCreateFailed, Step: int(rules.CreateFailed)})
	withMR := s.changes.add(Change{SubjectID: "b", TargetKey: "prod", Status: rules.StatusMerging, Step: int(rules.HandleStarted),
		ProjectID: 7, MRIID: 12, MRWebURL: "https://gitlab.example/p/-/merge_requests/12"})
	waiting := s.changes.add(Change{SubjectID: "c", TargetKey: "prod", Status: rules.StatusApprovalSent, Step: int(rules.ApprovalSent), MRIID: 3})
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
		{"retry by an operator", rules.StatusCreateFailed, rules.CreateFailed, submitterToken, "retry", operatorToken, 200, `"status":"MR_CREATING"`, true},
		{"retry by its submitter", rules.StatusCreateFailed, rules.CreateFailed, submitterToken, "retry", submitterToken, 403, "this needs an operator token", false},
		{"resume by a viewer", rules.StatusCreateFailed, rules.CreateFailed, submitterToken, "resume", viewerToken, 403, "this needs an operator token", false},
		{"resume of a failed change", rules.StatusCreateFailed, rules.CreateFailed, submitterToken, "resume", operatorToken, 409, "cannot resume", true},
		{"resume of a parked change", rules.StatusApprovalSending, rules.ApprovalSendPending, submitterToken, "resume", operatorToken, 200, `"operation_id"`, true},
		{"cancel by its submitter", rules.StatusApprovalSent, rules.ApprovalSent, submitterToken, "cancel", submitterToken, 200, `"status":"CLOSED"`, true},
		{"cancel by another submitter", rules.StatusApprovalSent, rules.ApprovalSent, submitterToken, "cancel", otherToken, 403, "only the changes it submitted", false},
		{"cancel of a change no token submitted", rules.StatusApprovalSent, rules.ApprovalSent, "", "cancel", submitterToken, 403, "only the changes it submitted", false},
		{"cancel by a viewer", rules.StatusApprovalSent, rules.ApprovalSent, submitterToken, "cancel", viewerToken, 403, "a viewer token may not cancel changes", false},
		{"cancel by an operator", rules.StatusApprovalSent, rules.ApprovalSent, submitterToken, "cancel", operatorToken, 200, `"status":"CLOSED"`, true},
		{"cancel of a closed change", rules.StatusClosed, rules.Closed, submitterToken, "cancel", operatorToken, 409, "cannot cancel", true},
		{"no token", rules.StatusCreateFailed, rules.CreateFailed, submitterToken, "retry", "", 401, "bearer token", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "")
			owner := ""
			if tc.owner != "" {
				owner = TokenID(tc.owner)
			}
			id := s.changes.add(Change{SubjectID: "svc", TargetKey: "prod", Status: tc.status, Step: int(tc.step), SubmittedBy: owner})
			code, body := s.call(t, http.MethodPost, "/api/v1/changes/"+id+"/"+tc.action, tc.token, "")
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("status %d %s, want %d with %q", code, body, tc.code, tc.want)
			}
			if acted := len(s.changes.acts) > 0; acted != tc.acted {
				t.Fatalf("the engine was asked %v, want asked: %v", s.changes.acts, tc.acted)
			}
			if tc.acted {
				// The actor is the token that acted, by its id, as
				// submitted_by names the submitter: not its role alone.
				a := s.changes.acts[0]
				if string(a.Action) != tc.action || a.Params.Actor != TokenID(tc.token) || a.Params.Source != "api" {
					t.Errorf("the engine got %+v, want %s by %s from api", a, tc.action, TokenID(tc.token))
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
		code, body, h := s.callWith(t, http.MethodGet, "/api/v1/settings", "", "", map[string]string{"Authorization": tc.auth})
		if code != tc.code {
			t.Errorf("Authorization %q: %d %s, want %d", tc.auth, code, body, tc.code)
		}
		// RFC 6750 §3: a 401 says which scheme to use.
		if got := h.Get("WWW-Authenticate"); (code == http.StatusUnauthorized) != strings.HasPrefix(got, "Bearer ") {
			t.Errorf("Authorization %q: %d with WWW-Authenticate %q, want a Bearer challenge exactly on 401", tc.auth, code, got)
		}
	}
}

// opsFixture adds n changes of project p in status st to s and returns
// their ids in the order added (ids grow: the last is the newest).
func opsFixture(s *apiSetup, n int, p, st string, step rules.StepCode) []string {
	var ids []string
	for i := range n {
		ids = append(ids, s.changes.add(Change{SubjectID: fmt.Sprintf("%s-%d", p, i), TargetKey: "prod", Project: p,
			Status: st, Step: int(step), RequestedBy: "alice"}))
	}
	return ids
}

// TestGetChangeTellsAll: GET /api/v1/changes/{id} carries every field of
// the list's item (title, project, requested_by, times) and the files by
// path, action, size and sha256; the content only with ?include=content;
// an unknown include is a 400 naming it.
func TestGetChangeTellsAll(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	id := s.changes.add(Change{SubjectID: "svc", TargetKey: "prod", Project: "platform/config", Title: "Raise the limit",
		RequestedBy: "alice", Status: rules.StatusApprovalSent, Step: int(rules.ApprovalSent),
		Files: []File{{Path: "prod/limits.yaml", Content: "limit: 10\n"}, {Path: "old.yaml", Action: "delete"}}})
	code, body := s.call(t, http.MethodGet, "/api/v1/changes/"+id, viewerToken, "")
	if code != 200 {
		t.Fatalf("GET: %d %s", code, body)
	}
	var v struct {
		ChangeListItem
		Files []FileView `json:"files"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Title != "Raise the limit" || v.Project != "platform/config" || v.RequestedBy != "alice" || v.CreatedAt.IsZero() || v.UpdatedAt.IsZero() {
		t.Errorf("the change lacks list fields: %s", body)
	}
	sum := sha256.Sum256([]byte("limit: 10\n"))
	want := []FileView{
		{Path: "prod/limits.yaml", Action: FileCreateOrUpdate, Size: 10, SHA256: hex.EncodeToString(sum[:])},
		// The SHA-256 of no bytes.
		{Path: "old.yaml", Action: "delete", Size: 0, SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	}
	if !reflect.DeepEqual(v.Files, want) {
		t.Errorf("files %+v, want %+v", v.Files, want)
	}
	if strings.Contains(body, "limit: 10") {
		t.Errorf("the content is answered without include=content: %s", body)
	}
	_, body = s.call(t, http.MethodGet, "/api/v1/changes/"+id+"?include=content", viewerToken, "")
	if !strings.Contains(body, `"content":"limit: 10\n"`) {
		t.Errorf("include=content does not answer the content: %s", body)
	}
	if code, body := s.call(t, http.MethodGet, "/api/v1/changes/"+id+"?include=diff", viewerToken, ""); code != 400 || !strings.Contains(body, `include: \"diff\"`) {
		t.Errorf("include=diff: %d %s, want 400 naming it", code, body)
	}
	for _, path := range []string{"/api/v1/changes/" + id + "?active=true", "/api/v1/changes/" + id + "/events?foo=1"} {
		if code, body := s.call(t, http.MethodGet, path, viewerToken, ""); code != 400 || !strings.Contains(body, "query parameter") || !strings.Contains(body, "unknown") {
			t.Errorf("GET %s: %d %s, want 400 naming the unknown parameter", path, code, body)
		}
	}
}

// TestChangeActionTakesAReason: retry, resume and cancel take the body
// {"reason": "..."} (optional) and hand the reason to the engine, which
// records it; a reason that is not one line of text is a 400 naming
// reason, and nothing is asked of the engine.
func TestChangeActionTakesAReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		code       int
		reason     string
	}{
		{"with a reason", `{"reason": " wrong file "}`, 200, "wrong file"},
		{"empty body", ``, 200, ""},
		{"no reason", `{}`, 200, ""},
		{"not text", `{"reason": 42}`, 400, ""},
		{"two lines", `{"reason": "a\nb"}`, 400, ""},
		{"unknown field", `{"why": "x"}`, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "")
			id := s.changes.add(Change{SubjectID: "svc", TargetKey: "prod", Status: rules.StatusApprovalSent, Step: int(rules.ApprovalSent)})
			code, body := s.call(t, http.MethodPost, "/api/v1/changes/"+id+"/cancel", operatorToken, tc.body)
			if code != tc.code {
				t.Fatalf("cancel with %q: %d %s, want %d", tc.body, code, body, tc.code)
			}
			if code != 200 {
				if !strings.Contains(body, "reason") && !strings.Contains(body, "why") {
					t.Errorf("the 400 does not name the field: %s", body)
				}
				if len(s.changes.acts) != 0 {
					t.Errorf("the engine was asked %v after a 400", s.changes.acts)
				}
				return
			}
			if len(s.changes.acts) != 1 || s.changes.acts[0].Params.Reason != tc.reason {
				t.Errorf("the engine got %+v, want one cancel with reason %q", s.changes.acts, tc.reason)
			}
		})
	}
}
