package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"changebot/flows/rules"
)

// documentRouter routes requests to the operations of openapi.json, once.
var documentRouter = sync.OnceValues(func() (routers.Router, error) {
	spec, err := openapi3.NewLoader().LoadFromData(OpenAPIDocument())
	if err != nil {
		return nil, err
	}
	if err := spec.Validate(context.Background()); err != nil {
		return nil, err
	}
	return gorillamux.NewRouter(spec)
})

// callDocumented is call, with the request and the answer checked against
// openapi.json as the bot's end-to-end tests check theirs: a request the
// document refuses must be refused (4xx), an answer must have a
// documented status and match its schema.
func (s *apiSetup) callDocumented(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	code, answer, header := s.callWith(t, method, path, token, body, nil)
	router, err := documentRouter()
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s is not in openapi.json: %v", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && code < 400 {
		t.Errorf("openapi.json refuses %s %s (%v), yet it was answered %d", method, path, err, code)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: code, Header: header,
		Body: io.NopCloser(bytes.NewReader([]byte(answer))), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("the answer %d to %s %s does not match openapi.json: %v\nbody: %s", code, method, path, err, answer)
	}
	return code, answer
}

// sampleQueues stores two queues of project 101: main, with a head and
// three changes waiting (the last moved to the front earlier), and
// release/1.0, frozen with nobody in it.
func sampleQueues(s *apiSetup) (main, release Queue) {
	t0 := s.changes.now
	main = Queue{ProjectID: 101, Project: "platform/config", TargetBranch: "main",
		Head: &QueueHead{OperationID: "op_head", MRIID: 40, MRWebURL: "https://gitlab.example/platform/config/-/merge_requests/40", Since: t0.Add(-10 * time.Minute)},
		Waiting: []QueuedChange{
			{OperationID: "op_q3", MRIID: 43, MRWebURL: "https://gitlab.example/mr/43", Title: "third", SubjectID: "s3", TargetKey: "prod",
				ReadyAt: t0.Add(-3 * time.Minute), FrontAt: t0.Add(-time.Minute), FrontBy: "api:0123456789abcdef"},
			{OperationID: "op_q1", MRIID: 41, MRWebURL: "https://gitlab.example/mr/41", Title: "first", SubjectID: "s1", TargetKey: "prod", ReadyAt: t0.Add(-5 * time.Minute)},
			{OperationID: "op_q2", MRIID: 42, MRWebURL: "https://gitlab.example/mr/42", Title: "second", SubjectID: "s2", TargetKey: "prod", ReadyAt: t0.Add(-4 * time.Minute)},
		}}
	release = Queue{ProjectID: 101, TargetBranch: "release/1.0", FrozenAt: t0.Add(-time.Hour), FrozenBy: "olivia", FrozenReason: "release freeze"}
	s.queues.put(main)
	s.queues.put(release)
	for _, w := range main.Waiting {
		s.changes.add(Change{ID: w.OperationID, SubjectID: w.SubjectID, TargetKey: w.TargetKey, Title: w.Title, Status: rules.StatusMerging,
			Step: int(rules.HandleQueued), ProjectID: 101, MRIID: w.MRIID, MRWebURL: w.MRWebURL})
	}
	s.changes.add(Change{ID: "op_head", SubjectID: "s0", TargetKey: "prod", Status: rules.StatusMerging, Step: int(rules.HandleApproved), ProjectID: 101, MRIID: 40})
	return main, release
}

// TestQueueList: any token lists the merge queues, each with its head (or
// null), how many wait and its freeze (or null); no queue is an empty
// list; a query parameter is refused.
func TestQueueList(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	if code, body := s.callDocumented(t, http.MethodGet, "/api/v1/queues", viewerToken, ""); code != 200 || body != `{"queues":[]}`+"\n" {
		t.Errorf("no queues: %d %s, want 200 {\"queues\":[]}", code, body)
	}
	sampleQueues(s)
	code, body := s.callDocumented(t, http.MethodGet, "/api/v1/queues", viewerToken, "")
	want := `{"queues":[` +
		`{"project_id":101,"project":"platform/config","target_branch":"main",` +
		`"head":{"operation_id":"op_head","mr_iid":40,"mr_web_url":"https://gitlab.example/platform/config/-/merge_requests/40","since":"2026-12-01T09:50:00Z"},` +
		`"waiting":3,"frozen":null},` +
		`{"project_id":101,"project":"","target_branch":"release/1.0","head":null,"waiting":0,` +
		`"frozen":{"by":"olivia","reason":"release freeze","at":"2026-12-01T09:00:00Z"}}]}` + "\n"
	if code != 200 || body != want {
		t.Errorf("GET /api/v1/queues = %d\n%s\nwant 200\n%s", code, body, want)
	}
	if code, body := s.callDocumented(t, http.MethodGet, "/api/v1/queues?branch=main", viewerToken, ""); code != 400 || !strings.Contains(body, `\"branch\"`) {
		t.Errorf("with ?branch=: %d %s, want 400 naming branch", code, body)
	}
	if code, _ := s.call(t, http.MethodGet, "/api/v1/queues", "", ""); code != 401 {
		t.Errorf("without a token: %d, want 401", code)
	}
	s.queues.err = errors.New("connection refused")
	if code, body := s.callDocumented(t, http.MethodGet, "/api/v1/queues", viewerToken, ""); code != 503 || strings.Contains(body, "connection refused") {
		t.Errorf("store down: %d %s, want 503 without the store's error", code, body)
	}
}

// TestQueueRead: one queue answers its waiting changes in order with their
// place, who moved one to the front and when; a branch with a slash is
// the rest of the path, escaped or not; a queue nobody used is 200 and
// empty; a project that is not a numeric id is a 400 naming project.
func TestQueueRead(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	main, _ := sampleQueues(s)
	code, body := s.callDocumented(t, http.MethodGet, "/api/v1/queues/101/main", viewerToken, "")
	if code != 200 {
		t.Fatalf("GET main: %d %s", code, body)
	}
	var got QueueView
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if want := NewQueueView(main); !reflect.DeepEqual(got, want) {
		t.Errorf("GET main = %+v, want %+v", got, want)
	}
	var order []string
	for _, w := range got.Waiting {
		order = append(order, w.OperationID)
	}
	if !reflect.DeepEqual(order, []string{"op_q3", "op_q1", "op_q2"}) || got.Waiting[2].Position != 3 {
		t.Errorf("waiting %v, want op_q3, op_q1, op_q2 at places 1 to 3", order)
	}
	for _, part := range []string{`"position":1,"operation_id":"op_q3","mr_iid":43,"mr_web_url":"https://gitlab.example/mr/43","title":"third",` +
		`"subject_id":"s3","target_key":"prod","ready_at":"2026-12-01T09:57:00Z","moved_to_front_by":"api:0123456789abcdef","moved_to_front_at":"2026-12-01T09:59:00Z"}`,
		`"operation_id":"op_q1","mr_iid":41,"mr_web_url":"https://gitlab.example/mr/41","title":"first","subject_id":"s1","target_key":"prod",` +
			`"ready_at":"2026-12-01T09:55:00Z","moved_to_front_by":null,"moved_to_front_at":null}`} {
		if !strings.Contains(body, part) {
			t.Errorf("GET main %s lacks %s", body, part)
		}
	}
	for _, path := range []string{"/api/v1/queues/101/release%2F1.0", "/api/v1/queues/101/release/1.0"} {
		code, body := s.call(t, http.MethodGet, path, viewerToken, "")
		if code != 200 || !strings.Contains(body, `"target_branch":"release/1.0"`) || !strings.Contains(body, `"frozen":{"by":"olivia"`) {
			t.Errorf("GET %s: %d %s, want the frozen release/1.0", path, code, body)
		}
	}
	if _, body := s.callDocumented(t, http.MethodGet, "/api/v1/queues/101/release%2F1.0", viewerToken, ""); !strings.Contains(body, `"waiting":[]`) {
		t.Errorf("an empty queue's waiting is %s, want []", body)
	}
	code, body = s.callDocumented(t, http.MethodGet, "/api/v1/queues/202/develop", viewerToken, "")
	if want := `{"project_id":202,"project":"","target_branch":"develop","head":null,"frozen":null,"waiting":[]}` + "\n"; code != 200 || body != want {
		t.Errorf("a queue nobody used: %d %s, want 200 %s", code, body, want)
	}
	for _, path := range []string{"/api/v1/queues/platform/main", "/api/v1/queues/0/main", "/api/v1/queues/-3/main"} {
		code, body := s.callDocumented(t, http.MethodGet, path, viewerToken, "")
		if code != 400 || !strings.Contains(body, `"field":"project"`) || !strings.Contains(body, "numeric project id") {
			t.Errorf("GET %s: %d %s, want 400 naming project", path, code, body)
		}
	}
	if code, body := s.call(t, http.MethodGet, "/api/v1/queues/101/ma%1Bin", viewerToken, ""); code != 400 || !strings.Contains(body, `"field":"branch"`) {
		t.Errorf("a branch with an escape: %d %s, want 400 naming branch", code, body)
	}
}

// TestQueueFreeze: an operator freezes a queue with a reason, recorded
// with the token's id, and unfreezes it; freezing a frozen queue keeps
// the first freeze; viewers and submitters are refused 403 and change
// nothing; a freeze without a reason, or with a control character in it,
// is a 400 naming reason.
func TestQueueFreeze(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	sampleQueues(s)
	code, body := s.callDocumented(t, http.MethodPost, "/api/v1/queues/101/main/freeze", operatorToken, `{"reason":"  main is red, investigating "}`)
	if code != 200 || !strings.Contains(body, `"frozen":{"by":"`+TokenID(operatorToken)+`","reason":"main is red, investigating","at":"2026-12-01T10:00:00Z"}`) ||
		!strings.Contains(body, `"operation_id":"op_q3"`) {
		t.Fatalf("freeze: %d %s, want 200 with the queue frozen by the operator's token and its waiting changes", code, body)
	}
	want := []fakeFreeze{{ProjectID: 101, Branch: "main", Frozen: true, Actor: TokenID(operatorToken), Reason: "main is red, investigating"}}
	if !reflect.DeepEqual(s.queues.freezes, want) {
		t.Errorf("freezes %+v, want %+v", s.queues.freezes, want)
	}
	if _, body := s.callDocumented(t, http.MethodPost, "/api/v1/queues/101/main/freeze", operatorToken, `{"reason":"again"}`); !strings.Contains(body, `"reason":"main is red, investigating"`) {
		t.Errorf("freezing again: %s, want the first freeze kept", body)
	}
	if code, body := s.callDocumented(t, http.MethodPost, "/api/v1/queues/101/release%2F1.0/unfreeze", operatorToken, ""); code != 200 || !strings.Contains(body, `"frozen":null`) {
		t.Errorf("unfreeze without a body: %d %s, want 200 unfrozen", code, body)
	}
	if code, body := s.callDocumented(t, http.MethodPost, "/api/v1/queues/101/main/unfreeze", operatorToken, `{"reason":"fixed by !44"}`); code != 200 || !strings.Contains(body, `"frozen":null`) {
		t.Errorf("unfreeze: %d %s, want 200 unfrozen", code, body)
	}
	calls := len(s.queues.freezes)
	tests := []struct {
		name, path, token, body string
		code                    int
		want                    []string
	}{
		{"a viewer", "/api/v1/queues/101/main/freeze", viewerToken, `{"reason":"x"}`, 403, []string{"operator"}},
		{"a submitter", "/api/v1/queues/101/main/freeze", submitterToken, `{"reason":"x"}`, 403, []string{"operator"}},
		{"a viewer unfreezing", "/api/v1/queues/101/main/unfreeze", viewerToken, `{}`, 403, []string{"operator"}},
		{"no token", "/api/v1/queues/101/main/freeze", "", `{"reason":"x"}`, 401, []string{"bearer token"}},
		{"no reason", "/api/v1/queues/101/main/freeze", operatorToken, `{}`, 400, []string{`"error":"reason is required`, `"field":"reason"`}},
		{"no body", "/api/v1/queues/101/main/freeze", operatorToken, "", 400, []string{`"error":"reason is required`, `"field":"reason"`}},
		{"a blank reason", "/api/v1/queues/101/main/freeze", operatorToken, `{"reason":" \u00a0 "}`, 400, []string{`"field":"reason"`, "is required"}},
		{"a newline in the reason", "/api/v1/queues/101/main/freeze", operatorToken, `{"reason":"red\nmain"}`, 400,
			[]string{`"field":"reason"`, "control character (U+000A)"}},
		{"an escape in the reason", "/api/v1/queues/101/main/unfreeze", operatorToken, `{"reason":"\u001b[31mred"}`, 400,
			[]string{`"field":"reason"`, "control character (U+001B)"}},
		{"a bidi override in the reason", "/api/v1/queues/101/main/freeze", operatorToken, `{"reason":"red\u202e"}`, 400,
			[]string{`"field":"reason"`, "bidirectional formatting character"}},
		{"a NUL in the reason", "/api/v1/queues/101/main/freeze", operatorToken, `{"reason":"a\u0000"}`, 400, []string{"NUL"}},
		{"a long reason", "/api/v1/queues/101/main/freeze", operatorToken, `{"reason":"` + strings.Repeat("é", 501) + `"}`, 400,
			[]string{`"field":"reason"`, "longer than 500 characters"}},
		{"an unknown field", "/api/v1/queues/101/main/freeze", operatorToken, `{"reason":"x","by":"me"}`, 400, []string{`unknown field \"by\"`}},
		{"a reason of the wrong type", "/api/v1/queues/101/main/freeze", operatorToken, `{"reason":5}`, 400, []string{"reason must be a string"}},
		{"a project that is no id", "/api/v1/queues/config/main/freeze", operatorToken, `{"reason":"x"}`, 400, []string{`"field":"project"`}},
	}
	for _, tc := range tests {
		code, body := s.callDocumented(t, http.MethodPost, tc.path, tc.token, tc.body)
		if code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.name, code, body, tc.code)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: %s lacks %q", tc.name, body, w)
			}
		}
	}
	if len(s.queues.freezes) != calls {
		t.Errorf("refused requests reached the queues: %+v", s.queues.freezes[calls:])
	}
	// A branch whose changes merge in parallel (409), or that does not
	// exist (404), is not frozen: a freeze there would hold nothing.
	s.queues.err = &NoQueueError{Reason: "the changes of main in g/r merge in parallel, without a merge queue"}
	if code, body := s.callDocumented(t, http.MethodPost, "/api/v1/queues/101/main/freeze", operatorToken, `{"reason":"x"}`); code != 409 ||
		!strings.Contains(body, "cannot freeze: the changes of main in g/r merge in parallel") {
		t.Errorf("no queue: %d %s, want 409 saying why", code, body)
	}
	s.queues.err = &NoQueueError{Reason: `branch "mian" not found in project g/r`, Unknown: true}
	if code, body := s.callDocumented(t, http.MethodPost, "/api/v1/queues/101/mian/freeze", operatorToken, `{"reason":"x"}`); code != 404 ||
		!strings.Contains(body, `branch \"mian\" not found`) {
		t.Errorf("unknown branch: %d %s, want 404 naming it", code, body)
	}
	s.queues.err = errors.New("connection refused")
	if code, body := s.callDocumented(t, http.MethodPost, "/api/v1/queues/101/main/freeze", operatorToken, `{"reason":"x"}`); code != 503 ||
		!strings.Contains(body, "could not freeze the merge queue, try again") {
		t.Errorf("store down: %d %s, want 503 saying to try again", code, body)
	}
}

// TestQueueMoveToFront: an operator moves a waiting change to the front,
// after the changes moved before it, recorded with the token's id; a
// change that does not wait in a queue is a 409 saying so and where it
// is, an unknown one a 404; viewers and submitters are refused 403.
func TestQueueMoveToFront(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	sampleQueues(s)
	code, body := s.callDocumented(t, http.MethodPost, "/api/v1/changes/op_q2/front", operatorToken, `{"reason":"hotfix"}`)
	if code != 200 {
		t.Fatalf("front: %d %s", code, body)
	}
	var q QueueView
	if err := json.Unmarshal([]byte(body), &q); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, w := range q.Waiting {
		order = append(order, w.OperationID)
	}
	if !reflect.DeepEqual(order, []string{"op_q3", "op_q2", "op_q1"}) || q.Waiting[1].MovedToFrontBy == nil || *q.Waiting[1].MovedToFrontBy != TokenID(operatorToken) {
		t.Errorf("after the move: %s; want op_q3, op_q2 (moved by %s), op_q1", body, TokenID(operatorToken))
	}
	if want := []fakeFront{{ID: "op_q2", Actor: TokenID(operatorToken), Reason: "hotfix"}}; !reflect.DeepEqual(s.queues.fronts, want) {
		t.Errorf("fronts %+v, want %+v", s.queues.fronts, want)
	}
	if code, _ := s.callDocumented(t, http.MethodPost, "/api/v1/changes/op_q1/front", operatorToken, ""); code != 200 {
		t.Errorf("front without a body: %d, want 200", code)
	}
	code, body = s.callDocumented(t, http.MethodPost, "/api/v1/changes/op_head/front", operatorToken, `{"reason":"x"}`)
	if code != 409 || !strings.Contains(body, "change op_head is not waiting in a merge queue (it is at HANDLE_APPROVED)") || !strings.Contains(body, `"operation_id":"op_head"`) {
		t.Errorf("front of the head: %d %s, want 409 saying it is not waiting in a queue", code, body)
	}
	failed := s.changes.add(Change{SubjectID: "f", TargetKey: "prod", Status: rules.StatusHandleFailed, Step: int(rules.HandleFailed)})
	if code, body := s.callDocumented(t, http.MethodPost, "/api/v1/changes/"+failed+"/front", operatorToken, `{}`); code != 409 || !strings.Contains(body, "HANDLE_FAILED") {
		t.Errorf("front of a failed change: %d %s, want 409", code, body)
	}
	if code, body := s.callDocumented(t, http.MethodPost, "/api/v1/changes/op_nope/front", operatorToken, `{}`); code != 404 || !strings.Contains(body, "no change with id op_nope") {
		t.Errorf("front of an unknown change: %d %s, want 404", code, body)
	}
	for _, token := range []string{viewerToken, submitterToken} {
		if code, body := s.callDocumented(t, http.MethodPost, "/api/v1/changes/op_q2/front", token, `{"reason":"x"}`); code != 403 || !strings.Contains(body, "operator") {
			t.Errorf("front by a non-operator: %d %s, want 403", code, body)
		}
	}
	if code, body := s.callDocumented(t, http.MethodPost, "/api/v1/changes/op_q2/front", operatorToken, `{"reason":"\u0007"}`); code != 400 || !strings.Contains(body, `"field":"reason"`) {
		t.Errorf("a bell in the reason: %d %s, want 400 naming reason", code, body)
	}
	if len(s.queues.fronts) != 2 {
		t.Errorf("fronts %+v, want the two accepted moves only", s.queues.fronts)
	}
}

// TestQueueRoutesAnswer405: the queue routes answer another method with
// 405 and the methods they serve.
func TestQueueRoutesAnswer405(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	for _, tt := range []struct{ method, path, allow string }{
		{http.MethodPost, "/api/v1/queues", "GET"},
		{http.MethodPost, "/api/v1/queues/101/main", "GET"},
		{http.MethodPut, "/api/v1/queues/101/main/freeze", "GET, POST"},
		{http.MethodGet, "/api/v1/changes/op_1/front", "POST"},
		// A GET of the freeze is not a read of a branch "main/freeze".
		{http.MethodGet, "/api/v1/queues/101/main/freeze", "POST"},
		{http.MethodGet, "/api/v1/queues/101/release/1.0/unfreeze", "POST"},
	} {
		code, body, h := s.callWith(t, tt.method, tt.path, operatorToken, "", nil)
		if code != 405 || h.Get("Allow") != tt.allow {
			t.Errorf("%s %s: %d %s, Allow %q; want 405, Allow %q", tt.method, tt.path, code, body, h.Get("Allow"), tt.allow)
		}
	}
}
