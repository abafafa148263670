package bot

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// submitCall posts body to path with "Authorization: <scheme> <token>" and an
// optional Idempotency-Key, and returns the status and the body.
func submitCall(t *testing.T, env *demoEnv, path, scheme, token, idem string, body []byte) (int, string) {
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
	return `{"subject_id":"` + subject + `","target_key":"prod","project":"` + demoProject + `",` +
		`"title":"t","requested_by":"alice","files":[{"path":"a.yaml","content":"a: 1\n"}]}`
}

// TestSubmitRefusesBadInputNamingTheField is issue 9 defect 17: bad input
// is answered 400 naming the field (never 503 "try again", never changed
// and committed, never with Go's type names) and creates nothing.
func TestSubmitRefusesBadInputNamingTheField(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 100*time.Millisecond)
	app, sc := startBot(t, env)
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
		{"lone surrogate escape in description", strings.Replace(validChange("sur"), `"title":"t"`, `"title":"t","description":"\ud800"`, 1), []string{`"field":"description"`, "UTF-8"}},
		{"subject_id too long", validChange(long), []string{`"field":"subject_id"`, "255"}},
		{"target_key too long", strings.Replace(validChange("tk"), `"prod"`, `"`+long+`"`, 1), []string{`"field":"target_key"`, "255"}},
		{"requested_by too long", strings.Replace(validChange("rb"), `"alice"`, `"`+long+`"`, 1), []string{`"field":"requested_by"`}},
		{"requested_by with a space", strings.Replace(validChange("rbs"), `"alice"`, `"alice smith"`, 1), []string{`"field":"requested_by"`, "GitLab username"}},
		{"requested_by starting with a dash", strings.Replace(validChange("rbd"), `"alice"`, `"-alice"`, 1), []string{`"field":"requested_by"`}},
		{"requested_by ending in .git", strings.Replace(validChange("rbg"), `"alice"`, `"alice.git"`, 1), []string{`"field":"requested_by"`}},
		{"subject_id of the wrong type", strings.Replace(validChange("x"), `"x"`, `42`, 1), []string{"subject_id", "string"}},
		{"files of the wrong type", strings.Replace(validChange("fw"), `[{"path":"a.yaml","content":"a: 1\n"}]`, `"a.yaml"`, 1), []string{"files", "array"}},
		{"file path of the wrong type", strings.Replace(validChange("fp"), `"path":"a.yaml"`, `"path":7`, 1), []string{"files.path", "string"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := submitCall(t, env, "/api/v1/changes", "Bearer", demoAPIToken, "", []byte(tc.body))
			if code != http.StatusBadRequest {
				t.Fatalf("status %d %s, want 400", code, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("body %s does not contain %q", body, w)
				}
			}
			for _, leak := range []string{"Go struct", "changeRequest", "try again"} {
				if strings.Contains(body, leak) {
					t.Errorf("body %s contains %q", body, leak)
				}
			}
		})
	}
	n, err := app.Store().CountActive(context.Background(), sc.Pool)
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
	code, first := submitCall(t, env, "/api/v1/changes", "Bearer", demoAPIToken, "key-1", []byte(validChange("idem")))
	if code != http.StatusAccepted {
		t.Fatalf("first submission: %d %s", code, first)
	}
	code, again := submitCall(t, env, "/api/v1/changes", "Bearer", demoAPIToken, "key-1", []byte(validChange("idem")))
	if code != http.StatusOK || again != first {
		t.Fatalf("same key, same body: %d %s, want 200 %s", code, again, first)
	}
	other := strings.Replace(validChange("idem"), `"title":"t"`, `"title":"another title"`, 1)
	code, body := submitCall(t, env, "/api/v1/changes", "Bearer", demoAPIToken, "key-1", []byte(other))
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
		code, body := submitCall(t, env, "/api/v1/changes", scheme, demoAPIToken, "", []byte(validChange("scheme"+string(rune('a'+i)))))
		if code != http.StatusAccepted {
			t.Errorf("scheme %q: %d %s, want 202", scheme, code, body)
		}
	}
	if code, _ := submitCall(t, env, "/api/v1/changes", "Basic", demoAPIToken, "", []byte(validChange("basic"))); code != http.StatusUnauthorized {
		t.Errorf("scheme Basic: %d, want 401", code)
	}
}
