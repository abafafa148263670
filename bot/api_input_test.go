package bot

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/platform/gitlab/gitlabfake"
)

// submitCall posts body to path with "Authorization: <scheme> <token>" and an
// optional Idempotency-Key, and returns the status and the body.
func submitCall(t *testing.T, env *demo.Env, path, scheme, token, idem string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, env.BaseURL+path, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", scheme+" "+token)
	req.Header.Set("Content-Type", "application/json")
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// validChange is a submission of the demo project that the API accepts;
// subject makes its binding unique.
func validChange(subject string) string {
	return `{"subject_id":"` + subject + `","target_key":"prod","project":"` + demo.Project + `",` +
		`"title":"t","requested_by":"alice","files":[{"path":"a.yaml","content":"a: 1\n"}]}`
}

// TestSubmitRefusesBadInputNamingTheField is issue 9 defect 17: bad input
// is answered 400 naming the field (never 503 "try again", never changed
// and committed, never with Go's type names) and creates nothing.
func TestSubmitRefusesBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 100*time.Millisecond)
	app, _ := startBot(t, env)
	long := strings.Repeat("x", 256)
	tests := []struct {
		name string
		body string
		want []string // substrings of the 400 body
	}{
		{"NUL escape in subject_id", strings.Replace(validChange("nul"), `"nul"`, `"a\u0000b"`, 1), []string{`"field":"subject_id"`, "NUL"}},
		{"NUL escape in file content", strings.Replace(validChange("nulc"), `a: 1\n`, `a: 1\u0000`, 1), []string{`"field":"files[0].content"`, "NUL"}},
		{"NUL escape in title", strings.Replace(validChange("nult"), `"title":"t"`, `"title":"t\u0000"`, 1), []string{`"field":"title"`}},
		{"invalid UTF-8 in title", strings.Replace(validChange("utf"), `"title":"t"`, "\"title\":\"t\xff\xfe\"", 1), []string{`"field":"title"`, "UTF-8"}},
		{"invalid UTF-8 in file content", strings.Replace(validChange("utfc"), `a: 1\n`, "a: \xc3\x28", 1), []string{`"field":"files[0].content"`, "UTF-8"}},
		{"invalid UTF-8 in project", strings.Replace(validChange("utfp"), `"project":"`, "\"project\":\"\xff", 1), []string{"project", "UTF-8"}},
		{"lone surrogate escape in description", strings.Replace(validChange("sur"), `"title":"t"`, `"title":"t","description":"\ud800"`, 1), []string{`"field":"description"`, "UTF-8"}},
		{"subject_id too long", validChange(long), []string{`"field":"subject_id"`, "255"}},
		{"target_key too long", strings.Replace(validChange("tk"), `"prod"`, `"`+long+`"`, 1), []string{`"field":"target_key"`, "255"}},
		// GitLab's MR title limit (issue 10 point 5): it can never fit, so it is refused at submit.
		{"title over GitLab's 255 characters", strings.Replace(validChange("tl"), `"title":"t"`, `"title":"`+strings.Repeat("é", 256)+`"`, 1), []string{`"field":"title"`, "255"}},
		{"requested_by too long", strings.Replace(validChange("rb"), `"alice"`, `"`+long+`"`, 1), []string{`"field":"requested_by"`}},
		{"requested_by with a space", strings.Replace(validChange("rbs"), `"alice"`, `"alice smith"`, 1), []string{`"field":"requested_by"`, "GitLab username"}},
		{"requested_by starting with a dash", strings.Replace(validChange("rbd"), `"alice"`, `"-alice"`, 1), []string{`"field":"requested_by"`}},
		{"requested_by ending in .git", strings.Replace(validChange("rbg"), `"alice"`, `"alice.git"`, 1), []string{`"field":"requested_by"`}},
		{"subject_id of the wrong type", strings.Replace(validChange("x"), `"x"`, `42`, 1), []string{"subject_id", "string"}},
		{"files of the wrong type", strings.Replace(validChange("fw"), `[{"path":"a.yaml","content":"a: 1\n"}]`, `"a.yaml"`, 1), []string{"files", "array"}},
		{"newline in subject_id", strings.Replace(validChange("nl"), `"nl"`, `"g4\ng5"`, 1), []string{`"field":"subject_id"`, "control character (U+000A)"}},
		{"tab in target_key", strings.Replace(validChange("tab"), `"prod"`, `"prod\t"`, 1), []string{`"field":"target_key"`, "control character (U+0009)"}},
		{"escape in title", strings.Replace(validChange("esc"), `"title":"t"`, `"title":"t\u001b[31m"`, 1), []string{`"field":"title"`, "control character (U+001B)"}},
		{"bidi override in title", strings.Replace(validChange("bidi"), `"title":"t"`, `"title":"t\u202egpj.exe"`, 1), []string{`"field":"title"`, "bidirectional formatting character (U+202E)"}},
		// A file without content was written empty.
		{"file without content or action", strings.Replace(validChange("fc"), `{"path":"a.yaml","content":"a: 1\n"}`, `{"path":"a.yaml"}`, 1),
			[]string{`"field":"files[0].content"`, "required"}},
		{"update without content", strings.Replace(validChange("fu"), `{"path":"a.yaml","content":"a: 1\n"}`, `{"path":"b.yaml","content":"b"},{"path":"a.yaml","action":"update"}`, 1),
			[]string{`"field":"files[1].content"`, "required"}},
		{"create with null content", strings.Replace(validChange("fn"), `"content":"a: 1\n"`, `"content":null,"action":"create"`, 1),
			[]string{`"field":"files[0].content"`, "required"}},
		// The path with its index, not encoding/json's "files.path".
		{"file path of the wrong type", strings.Replace(validChange("fp"), `"path":"a.yaml"`, `"path":7`, 1), []string{"field files[0].path must be a string, not a number"}},
		{"second file path of the wrong type", strings.Replace(validChange("fp2"), `{"path":"a.yaml","content":"a: 1\n"}`, `{"path":"a.yaml","content":"a"},{"path":true,"content":"b"}`, 1),
			[]string{"field files[1].path must be a string, not true or false"}},
		{"body not an object", `["x"]`, []string{"the body must be an object, not an array"}},
		// Duplicate keys: encoding/json kept the last one silently.
		{"subject_id twice", strings.Replace(validChange("g4"), `"subject_id":"g4"`, `"subject_id":"g4","subject_id":"g5"`, 1), []string{"duplicate key subject_id"}},
		// json.Decoder.More is false before a stray "}" or "]": it used to let these through.
		{"a stray brace after the body", validChange("sb") + " }", []string{"data after the JSON value"}},
		{"a stray bracket after the body", validChange("sk") + "]", []string{"data after the JSON value"}},
		{"a second value after the body", validChange("sv") + " {}", []string{"data after the JSON value"}},
		{"a file's path twice", strings.Replace(validChange("dp"), `{"path":"a.yaml"`, `{"path":"b.yaml","path":"a.yaml"`, 1), []string{"duplicate key files[0].path"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := submitCall(t, env, "/api/v1/changes", "Bearer", demo.APIToken, "", []byte(tc.body))
			if code != http.StatusBadRequest {
				t.Fatalf("status %d %s, want 400", code, body)
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
		})
	}
	n, err := app.Store().CountActive(context.Background(), app.Store().DB())
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d changes were created by refused submissions", n)
	}
}

// TestSubmitIdempotencyKeyReusedWithAnotherBody is issue 9 defect 17: the
// same key with the same body answers the first operation (200); with
// another body it answers 422 naming the conflict and creates nothing.
func TestSubmitIdempotencyKeyReusedWithAnotherBody(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 100*time.Millisecond)
	startBot(t, env)
	code, first := submitCall(t, env, "/api/v1/changes", "Bearer", demo.APIToken, "key-1", []byte(validChange("idem")))
	if code != http.StatusAccepted {
		t.Fatalf("first submission: %d %s", code, first)
	}
	// A repeat answers from the database alone: GitLab being down does
	// not turn it into a 503.
	env.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodGet, PathPattern: "/api/v4/projects/*", Status: 503})
	code, again := submitCall(t, env, "/api/v1/changes", "Bearer", demo.APIToken, "key-1", []byte(validChange("idem")))
	env.GitLab.ClearFaults()
	if code != http.StatusOK || again != first {
		t.Fatalf("same key, same body: %d %s, want 200 %s", code, again, first)
	}
	other := strings.Replace(validChange("idem"), `"title":"t"`, `"title":"another title"`, 1)
	code, body := submitCall(t, env, "/api/v1/changes", "Bearer", demo.APIToken, "key-1", []byte(other))
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "Idempotency-Key") || !strings.Contains(body, "title") {
		t.Fatalf("same key, another body: %d %s, want 422 naming the key and the differing field", code, body)
	}
}

// TestAPIBearerSchemeIsCaseInsensitive is issue 9 defect 17: the
// authentication scheme is case-insensitive (RFC 9110 §11.1).
func TestAPIBearerSchemeIsCaseInsensitive(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 100*time.Millisecond)
	startBot(t, env)
	for i, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		code, body := submitCall(t, env, "/api/v1/changes", scheme, demo.APIToken, "", []byte(validChange("scheme"+string(rune('a'+i)))))
		if code != http.StatusAccepted {
			t.Errorf("scheme %q: %d %s, want 202", scheme, code, body)
		}
	}
	if code, _ := submitCall(t, env, "/api/v1/changes", "Basic", demo.APIToken, "", []byte(validChange("basic"))); code != http.StatusUnauthorized {
		t.Errorf("scheme Basic: %d, want 401", code)
	}
}

// TestSubmitCheckedAgainstGitLab is issue 9 defect 16: before the 202 the
// project, the target branch and the files' actions are checked against
// GitLab with reads only (one tree listing for the files); problems answer
// 422 listing every one, an unreachable GitLab 503 with Retry-After, and
// nothing is created or sent to the approver. The project and the branch
// read within the minute are not read again.
func TestSubmitCheckedAgainstGitLab(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 100*time.Millisecond)
	app, _ := startBot(t, env)
	n := 0
	change := func(project, branch, files string) []byte {
		n++ // a binding of its own per case
		return []byte(`{"subject_id":"svc` + string(rune('a'+n)) + `","target_key":"prod","project":"` + project + `","target_branch":"` + branch +
			`","title":"t","requested_by":"alice","files":` + files + `}`)
	}
	okFiles := `[{"path":"a.yaml","content":"a: 1\n"}]`
	tests := []struct {
		name  string
		fault *gitlabfake.Fault
		body  []byte
		code  int
		want  []string
	}{
		// First, while the bot has read nothing of the project yet.
		{name: "GitLab unavailable", fault: &gitlabfake.Fault{Method: http.MethodGet, PathPattern: "/api/v4/projects/*", Status: 503},
			body: change(demo.Project, "", okFiles), code: http.StatusServiceUnavailable, want: []string{"GitLab"}},
		{name: "unknown project", body: change("nope/nope", "", okFiles), code: http.StatusUnprocessableEntity,
			want: []string{`"field":"project"`, "nope/nope"}},
		{name: "unknown target branch", body: change(demo.Project, "nope", okFiles), code: http.StatusUnprocessableEntity,
			want: []string{`"field":"target_branch"`, "nope"}},
		{name: "file actions that do not fit the branch", code: http.StatusUnprocessableEntity,
			body: change(demo.Project, "main", `[{"path":"missing.yaml","content":"x","action":"update"},`+
				`{"path":"README.md","content":"x","action":"create"},{"path":"gone/b.yaml","action":"delete"},`+
				`{"path":"new.yaml","content":"x","action":"create"},{"path":"any.yaml","content":"x"}]`),
			want: []string{`"field":"files[0].action"`, `"field":"files[1].action"`, `"field":"files[2].action"`}},
		// The project and its branch were read within the minute (issue 22
		// point 1: a burst shares those reads): GitLab is not asked again,
		// so its 503 does not refuse the change.
		{name: "project and branch read within the minute", fault: &gitlabfake.Fault{Method: http.MethodGet, PathPattern: "/api/v4/projects/*", Status: 503},
			body: change(demo.Project, "main", okFiles), code: http.StatusAccepted, want: []string{`"operation_id"`}},
		// Last: GitLab's 429 makes the account wait, and a call held back
		// by that wait defers a submit's checks as the budget does. The
		// tree listing is never taken from an earlier read.
		{name: "GitLab rate limited", fault: &gitlabfake.Fault{Method: http.MethodGet, PathPattern: "/api/v4/projects/*/repository/tree", Status: 429, RetryAfter: "7"},
			body: change(demo.Project, "main", `[{"path":"brand-new.yaml","content":"x","action":"create"}]`), code: http.StatusServiceUnavailable, want: []string{"GitLab"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env.GitLab.ClearFaults()
			if tc.fault != nil {
				env.GitLab.InjectFault(*tc.fault)
				defer env.GitLab.ClearFaults()
			}
			before := len(env.GitLab.Calls())
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, env.BaseURL+"/api/v1/changes", strings.NewReader(string(tc.body)))
			req.Header.Set("Authorization", "Bearer "+demo.APIToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			body := string(b)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, body, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("body %s does not contain %q", body, w)
				}
			}
			if tc.code == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
			if tc.fault != nil && tc.fault.RetryAfter != "" && resp.Header.Get("Retry-After") != tc.fault.RetryAfter {
				t.Errorf("Retry-After %q, want GitLab's %q", resp.Header.Get("Retry-After"), tc.fault.RetryAfter)
			}
			var trees int
			for _, c := range env.GitLab.Calls()[before:] {
				if c.Method != http.MethodGet {
					t.Errorf("submission made a GitLab write: %s %s", c.Method, c.Path)
				}
				if strings.HasSuffix(c.Path, "/repository/tree") {
					trees++
				}
			}
			if trees > 1 {
				t.Errorf("%d tree listings, want at most one", trees)
			}
		})
	}
	n, err := app.Store().CountActive(context.Background(), app.Store().DB())
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d changes are active, want the one accepted: refused submissions create nothing", n)
	}
	if r := env.Approvals.Requests(); len(r) > 1 {
		t.Fatalf("refused submissions reached the approver: %+v", r)
	}
}

// TestSubmitterCancelsItsOwnChange is issue 9 defect 16: a submitter
// token may cancel the changes it submitted over the API (and no other
// submitter's); retry and resume stay with operators.
func TestSubmitterCancelsItsOwnChange(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 100*time.Millisecond)
	const otherSubmitter = "other-submitter-token"
	env.Config.APITokens = append(env.Config.APITokens, api.Token{Role: api.RoleSubmitter, Token: otherSubmitter})
	startBot(t, env)
	code, body := submitCall(t, env, "/api/v1/changes", "Bearer", demo.APIToken, "", []byte(validChange("own")))
	if code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	id := body[strings.Index(body, "op_") : strings.Index(body, "op_")+29]
	waitStep(t, env, id, "APPROVAL_SENT", 30*time.Second)
	if code, body := submitCall(t, env, "/api/v1/changes/"+id+"/cancel", "Bearer", otherSubmitter, "", nil); code != http.StatusForbidden {
		t.Fatalf("cancel by another submitter: %d %s, want 403", code, body)
	}
	for _, action := range []string{"retry", "resume"} {
		if code, body := submitCall(t, env, "/api/v1/changes/"+id+"/"+action, "Bearer", demo.APIToken, "", nil); code != http.StatusForbidden {
			t.Fatalf("%s by the submitter: %d %s, want 403", action, code, body)
		}
	}
	code, body = submitCall(t, env, "/api/v1/changes/"+id+"/cancel", "Bearer", demo.APIToken, "", nil)
	if code != http.StatusOK || !strings.Contains(body, `"status":"CLOSED"`) {
		t.Fatalf("cancel by its submitter: %d %s, want 200 CLOSED", code, body)
	}
}
