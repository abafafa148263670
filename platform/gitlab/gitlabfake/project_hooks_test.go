package gitlabfake

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"changebot/internal/fixture"
)

func TestProjectHooksAPI(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	hooks := e.projPath("/hooks")
	if st, _, _ := e.call("GET", hooks, reviewerToken, nil); st != http.StatusForbidden {
		t.Errorf("a Developer listing hooks: %d, want 403 (Maintainer needed)", st)
	}
	if st, _, b := e.call("POST", hooks, robotToken, map[string]any{"merge_requests_events": true}); st != http.StatusBadRequest || !strings.Contains(string(b), "url is missing") {
		t.Errorf("create without url: %d %s, want 400 url is missing", st, b)
	}
	h := e.must(201, "POST", hooks, robotToken, map[string]any{
		"url": "http://bot/webhooks/gitlab", "token": "s3cret", "merge_requests_events": true, "note_events": true,
	})
	if h["push_events"] != true || h["enable_ssl_verification"] != true || h["pipeline_events"] != false || h["merge_requests_events"] != true {
		t.Errorf("create: want GitLab's defaults (push_events, enable_ssl_verification true) plus the given triggers, got %v", h)
	}
	if _, ok := h["token"]; ok {
		t.Errorf("the token must never be answered: %v", h)
	}
	id := itoa(int64(h["id"].(float64)))
	st, hdr, b := e.call("GET", hooks, robotToken, nil)
	if st != 200 || hdr.Get("X-Total") != "1" || !bytes.Contains(b, []byte(`"alert_status":"executable"`)) {
		t.Errorf("list: %d total %q %s", st, hdr.Get("X-Total"), b)
	}
	e.must(200, "PUT", hooks+"/"+id, robotToken, map[string]any{"url": "http://bot/webhooks/gitlab", "pipeline_events": true})
	if got := e.srv.ProjectHooks(e.proj.ID)[0]; got.Token != "s3cret" || len(got.Triggers) != 4 {
		t.Errorf("edit keeping the URL: token %q triggers %v, want the token kept and 4 triggers", got.Token, got.Triggers)
	}
	e.must(200, "PUT", hooks+"/"+id, robotToken, map[string]any{"url": "http://moved/webhooks/gitlab"})
	if got := e.srv.ProjectHooks(e.proj.ID)[0]; got.Token != "" {
		t.Errorf("edit changing the URL without a token: token %q, want it reset as GitLab does", got.Token)
	}
	e.srv.DisableHook(int64(h["id"].(float64)), time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	got := e.must(200, "GET", hooks+"/"+id, robotToken, nil)
	if got["alert_status"] != HookTemporarilyDisabled || got["disabled_until"] != "2030-01-02T03:04:05.000Z" {
		t.Errorf("disabled hook: %v", got)
	}
}

func TestHookTestDelivery(t *testing.T) {
	t.Parallel()
	var gotToken, gotEvent string
	status := http.StatusOK
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotToken, gotEvent = r.Header.Get("X-Gitlab-Token"), r.Header.Get("X-Gitlab-Event")
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":"invalid webhook token"}`))
	}))
	t.Cleanup(bot.Close)
	e := setup(t, ProjectSpec{})
	h := e.srv.AddProjectHook(e.proj.ID, HookSpec{URL: bot.URL, Token: "s3cret", Triggers: []string{TriggerMergeRequests}})
	test := e.projPath("/hooks/" + itoa(h.ID) + "/test/")
	if st, _, b := e.call("POST", test+TriggerMergeRequests, robotToken, nil); st != 422 || !strings.Contains(string(b), "Ensure the project has merge requests.") {
		t.Errorf("test without an MR: %d %s, want 422 naming what is missing", st, b)
	}
	if st, _, _ := e.call("POST", test+"nonsense", robotToken, nil); st != 400 {
		t.Errorf("unknown trigger: %d, want 400", st)
	}
	e.openMR("feature")
	if b := e.must(201, "POST", test+TriggerMergeRequests, robotToken, nil); b["message"] != "201 Created" {
		t.Errorf("test answered %v", b)
	}
	if gotToken != "s3cret" || gotEvent != EventMergeRequest {
		t.Errorf("the receiver got token %q event %q, want the hook's token and %q", gotToken, gotEvent, EventMergeRequest)
	}
	status = http.StatusUnauthorized
	e.srv.DisableHook(h.ID, time.Time{})
	if st, _, b := e.call("POST", test+TriggerPush, robotToken, nil); st != 422 || !strings.Contains(string(b), "invalid webhook token") {
		t.Errorf("receiver answering 401: %d %s, want 422 carrying its body", st, b)
	}
	if got := e.srv.ProjectHooks(e.proj.ID)[0]; got.AlertStatus != HookDisabled || got.Tests != 2 {
		t.Errorf("after a failed test: %+v, want still disabled and 2 tests sent (none without an MR)", got)
	}
	status = http.StatusOK
	e.must(201, "POST", test+TriggerPush, robotToken, nil)
	if got := e.srv.ProjectHooks(e.proj.ID)[0]; got.AlertStatus != HookExecutable {
		t.Errorf("a test answered 2xx must re-enable the hook: %+v", got)
	}
}

func TestGroupHooks(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	e.srv.AddGroup("group", map[string]int{"robot": AccessOwner, "reviewer": AccessMaintainer})
	if st, _, _ := e.call("GET", "/groups/group/hooks", reviewerToken, nil); st != 403 {
		t.Errorf("a Maintainer listing group hooks: %d, want 403 (Owner needed)", st)
	}
	h := e.must(201, "POST", "/groups/group/hooks", robotToken, map[string]any{"url": "http://bot/webhooks/gitlab", "note_events": true})
	if h["group_id"] == nil || h["project_id"] != nil {
		t.Errorf("a group hook names its group: %v", h)
	}
	if st, _, _ := e.call("GET", e.projPath("/hooks"), robotToken, nil); st != 200 || len(e.srv.ProjectHooks(e.proj.ID)) != 0 {
		t.Errorf("group hooks are not project hooks")
	}
}

func TestTokenSelfAndRevoke(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	e.srv.SetTokenInfo(reviewerToken, TokenInfo{Scopes: []string{"read_api"}, ExpiresAt: time.Date(2027, 3, 4, 0, 0, 0, 0, time.UTC)})
	got := e.must(200, "GET", "/personal_access_tokens/self", reviewerToken, nil)
	if got["expires_at"] != "2027-03-04" || got["scopes"].([]any)[0] != "read_api" || got["active"] != true {
		t.Errorf("token self: %v", got)
	}
	if robot := e.must(200, "GET", "/personal_access_tokens/self", robotToken, nil); robot["expires_at"] != nil || robot["name"] != "robot-token" {
		t.Errorf("default token details: %v", robot)
	}
	e.srv.RevokeToken(reviewerToken)
	for _, p := range []string{"/personal_access_tokens/self", "/user"} {
		if st, _, _ := e.call("GET", p, reviewerToken, nil); st != 401 {
			t.Errorf("revoked token on %s: %d, want 401", p, st)
		}
	}
}

func TestFakeNoteEndpoint(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	mr := e.openMR("feature")
	post := func(path, body string) (int, string) {
		resp, err := http.Post(e.srv.URL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	iid := itoa(int64(mr["iid"].(float64)))
	tests := []struct {
		name, path, body string
		want             int
		wantIn           string
	}{
		{"by path", "/-/fake/projects/group%2Frepo/merge_requests/" + iid + "/notes", `{"username":"dave","body":"/retry"}`, 201, `"username":"dave"`},
		{"by id", "/-/fake/projects/" + itoa(e.proj.ID) + "/merge_requests/" + iid + "/notes", `{"username":"erin","body":"hello"}`, 201, `"body":"hello"`},
		{"no username", "/-/fake/projects/group%2Frepo/merge_requests/" + iid + "/notes", `{"body":"x"}`, 400, "username is missing"},
		{"no such MR", "/-/fake/projects/group%2Frepo/merge_requests/99/notes", `{"username":"dave","body":"x"}`, 404, "!99"},
		{"other path", "/-/fake/nothing", `{}`, 404, FakeNotesPath},
	}
	for _, tt := range tests {
		st, b := post(tt.path, tt.body)
		if st != tt.want || !strings.Contains(b, tt.wantIn) {
			t.Errorf("%s: %d %s, want %d containing %q", tt.name, st, b, tt.want, tt.wantIn)
		}
	}
	e.idle()
	var authors []string
	for _, n := range e.recv.find(EventNote, "create") {
		authors = append(authors, n["user"].(map[string]any)["username"].(string))
	}
	if strings.Join(authors, ",") != "dave,erin" {
		t.Errorf("Note Hooks sent for %v, want dave and erin", authors)
	}
}

// TestAdminFixtureShapes checks the webhook, token and protected-branch
// answers against the real shapes in testdata/gitlab.
func TestAdminFixtureShapes(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	h := e.must(201, "POST", e.projPath("/hooks"), robotToken, map[string]any{"url": "http://bot/webhooks/gitlab"})
	get := func(path string) []byte {
		st, _, b := e.call("GET", path, robotToken, nil)
		if st != 200 {
			t.Fatalf("GET %s: %d %s", path, st, b)
		}
		return b
	}
	tests := []struct {
		fixture    string
		got        []byte
		exceptions map[string]string
	}{
		{"api-project-hook-get.json", get(e.projPath("/hooks/" + itoa(int64(h["id"].(float64))))), map[string]string{
			"custom_headers[]": "the fake has no custom headers: empty",
			"url_variables[]":  "the fake has no URL variables",
		}},
		{"api-pat-self.json", get("/personal_access_tokens/self"), nil},
		{"api-protected-branch-get.json", get(e.projPath("/protected_branches/main")), nil},
	}
	for _, tt := range tests {
		var list []any
		if json.Unmarshal(tt.got, &list) == nil {
			t.Fatalf("%s: got a list", tt.fixture)
		}
		if diff := fixture.Diff(t, fixture.GitLab(t, tt.fixture), tt.got, fixture.Check{Exceptions: tt.exceptions}); len(diff) > 0 {
			t.Errorf("answer differs from %s:\n  %s\nanswer: %s", tt.fixture, strings.Join(diff, "\n  "), tt.got)
		}
	}
}
