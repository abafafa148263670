package api

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"changebot/flows/rules"
	"changebot/templates"
)

// login logs in on /ui/login with token, as the login form does, and
// returns the session cookie's value the answer sets.
func (s *apiSetup) login(t *testing.T, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+"/ui/login",
		strings.NewReader(url.Values{"token": {token}, "next": {"/ui/changes"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.srv.URL)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie && c.Value != "" {
			return c.Value
		}
	}
	t.Fatalf("login: %d without a session cookie", resp.StatusCode)
	return ""
}

// noRedirect is a client that answers a redirect as it is, for the tests
// to read its Location.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// page GETs path of s with the session cookie value cookie ("" for none)
// and returns the status and the body.
func (s *apiSetup) page(t *testing.T, cookie, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: cookie})
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestWebPagesRender: with a session, the overview, the list, needs
// attention, the queues and a change's page render what the fakes hold
// (filters, the state in words, the checklist, the files, the timeline,
// the hint of a change without a merge request), with the headers every
// page carries; an unknown change is a 404 page saying so,
// a bad filter a 400 page naming it.
func TestWebPagesRender(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	merging := s.changes.add(Change{SubjectID: "payments-api", TargetKey: "prod/eu", Project: "platform/config", Title: "Raise replicas",
		Status: rules.StatusMerging, Step: int(rules.HandleStarted), MRIID: 4, MRWebURL: "https://gitlab.example/p/-/merge_requests/4",
		Files: []File{{Path: "replicas.yaml", Content: "replicas: 3\n"}}})
	failed := s.changes.add(Change{SubjectID: "billing", TargetKey: "prod/us", Project: "platform/other",
		Status: rules.StatusCreateFailed, Step: int(rules.CreateFailed), Detail: "the registry was down"})
	old := s.changes.add(Change{SubjectID: "slow", TargetKey: "prod/ap", Project: "platform/config", Status: rules.StatusMRCreating,
		Step: int(rules.CreateMROpened), StepStartedAt: s.changes.now.Add(-72 * time.Hour), CreatedAt: s.changes.now.Add(-72 * time.Hour),
		UpdatedAt: s.changes.now.Add(-72 * time.Hour)})
	tests := []struct {
		name, path string
		code       int
		want, not  []string
	}{
		{"the list", "/ui/changes", 200, []string{`href="/ui/changes/` + merging + `"`, `href="/ui/changes/` + failed + `"`, "HANDLE_STARTED", "!4"}, nil},
		{"the list filtered", "/ui/changes?project=platform/other&status=", 200, []string{failed}, []string{merging}},
		{"needs attention", "/ui/attention", 200, []string{`id="group-slow"`, old, `id="group-failed"`, failed, "Chosen by:", "What to do:",
			`http-equiv="refresh"`}, []string{merging}},
		{"the overview", "/ui", 200, []string{`id="health"`, "No webhook delivery stored yet", `href="/ui/changes?status=MERGING"`,
			`<a href="/ui/changes?active=true&amp;project=platform%2fconfig">platform/config</a>`}, nil},
		{"the queues", "/ui/queues", 200, []string{`id="empty"`, "No merge queue yet"}, nil},
		{"the stuck view's link", "/ui/stuck", 301, []string{`href="/ui/attention"`}, nil},
		{"the stuck view's link with filters", "/ui/stuck?project=platform/config", 301,
			[]string{`href="/ui/changes?project=platform%2Fconfig&amp;stuck=true"`}, nil},
		{"a failed change's reason in its row", "/ui/attention", 200, []string{`<td class="detail">the registry was down</td>`}, nil},
		{"the list's quick filters", "/ui/changes?active=true", 200, []string{`id="quick"`, merging, failed, old, "in step",
			`<a href="/ui/changes?status=CREATE_FAILED,HANDLE_FAILED">Failed</a>`}, nil},
		{"no change matches", "/ui/changes?project=nobody", 200, []string{`id="empty"`, "show all changes"}, nil},
		{"a change's checklist and files", "/ui/changes/" + merging, 200, []string{`id="checklist"`,
			`<li class="check now">reviewer robots&#39; approvals`, `<li class="check later">merge<`, `id="files"`, "<code>replicas.yaml</code>",
			"create_or_update", `show content`}, []string{`id="file-content"`}},
		{"a file's content on request", "/ui/changes/" + merging + "?file=replicas.yaml", 200, []string{`id="file-content"`, "replicas: 3"}, nil},
		{"a viewer sees no action form", "/ui/changes/" + failed, 200, []string{`id="actions-readonly"`, "Retry, Cancel apply now"},
			[]string{`id="form-retry"`}},
		{"a bad filter", "/ui/changes?status=DONE", 400, []string{`id="error"`, "query parameter status"}, nil},
		{"a change with its MR", "/ui/changes/" + merging, 200, []string{"Merging merge request !4.", "Raise replicas", `<a href="https://gitlab.example/p/-/merge_requests/4">!4</a>`,
			`<table id="timeline">`, "Timeline (1 events"}, nil},
		{"a change without MR", "/ui/changes/" + failed, 200, []string{"Failed while opening the merge request.", externalURL + "/api/v1/changes/" + failed + "/retry", "none yet"}, nil},
		{"replayed at a time", "/ui/changes/" + merging + "?at=" + url.QueryEscape(s.changes.now.Add(time.Minute).Format(time.RFC3339)), 200,
			[]string{`id="replayed"`, "the change was <strong>MERGING</strong> at step HANDLE_STARTED"}, []string{`class="later"`}},
		{"replayed before it existed", "/ui/changes/" + merging + "?at=2020-01-01T00:00:00Z", 200, []string{"did not exist yet", `<tr class="later">`}, nil},
		{"replayed at no time", "/ui/changes/" + merging + "?at=yesterday", 400, []string{"at: not an RFC 3339 time"}, nil},
		{"an unknown change", "/ui/changes/op_none", 404, []string{`id="missing"`, "<code>op_none</code>"}, []string{`id="timeline"`}},
		{"the login page", "/ui/login?next=/ui/stuck", 200, []string{`name="token"`, `value="/ui/stuck"`}, nil},
	}
	viewer := s.login(t, viewerToken)
	for _, tc := range tests {
		code, body := s.page(t, viewer, tc.path)
		if code != tc.code {
			t.Errorf("%s: status %d, want %d\n%s", tc.name, code, tc.code, body)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: the page lacks %q\n%s", tc.name, w, body)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(body, w) {
				t.Errorf("%s: the page shows %q", tc.name, w)
			}
		}
		for _, secret := range []string{viewerToken, submitterToken, operatorToken} {
			if strings.Contains(body, secret) {
				t.Errorf("%s: the page shows a token", tc.name)
			}
		}
	}
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/ui/changes", nil)
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: viewer})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for k, want := range map[string]string{"Cache-Control": "no-store", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
		"Content-Type": "text/html; charset=utf-8"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("header %s: %q, want %q", k, got, want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	// A session of a token no longer configured is no session.
	removed, err := newSession(Token{Role: RoleViewer, Token: "tok-removed"}, s.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if code, body := s.page(t, removed, "/ui/changes"); code != 200 || !strings.Contains(body, "same_site=1") {
		t.Errorf("a stale session: %d %s, want the reload page", code, body)
	}
	if n := fmt.Sprint(len(s.changes.acts)); n != "0" {
		t.Errorf("the pages acted on changes: %s actions", n)
	}
}

// TestWebLoginRefusesForeignOrigin: the login form is the only POST of
// the pages, and it is refused unless its Origin names this server, so
// another site cannot log a browser in with its own token (login CSRF).
// A page opened without a session reloads itself once (the strict cookie
// is not sent on an arrival from another site), then asks to log in, and
// the login leads back only to a page of this server. A viewer token reads
// but cannot submit.
func TestWebLoginRefusesForeignOrigin(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	base := s.srv.URL
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login := func(origin, token string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, base+"/ui/login",
			strings.NewReader(url.Values{"token": {token}, "next": {"/ui/changes"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name, origin, token string
		want                int
	}{
		{"no Origin", "", viewerToken, http.StatusForbidden},
		{"foreign Origin", "https://evil.example", viewerToken, http.StatusForbidden},
		{"own Origin, wrong token", base, "nope", http.StatusUnauthorized},
		{"own Origin, viewer token", base, viewerToken, http.StatusSeeOther},
	} {
		resp := login(tc.origin, tc.token)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
		if got := len(resp.Cookies()) > 0; got != (tc.want == http.StatusSeeOther) {
			t.Errorf("%s: cookies %v", tc.name, resp.Cookies())
		}
	}
	get := func(path string) (*http.Response, string) {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/ui/changes/op_x?status=MERGED")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `content="0;url=/ui/changes/op_x?same_site=1&amp;status=MERGED"`) {
		t.Errorf("first arrival without a session: %d %s", resp.StatusCode, body)
	}
	resp, _ = get("/ui/changes/op_x?same_site=1&status=MERGED")
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/ui/login?next="+url.QueryEscape("/ui/changes/op_x?status=MERGED") {
		t.Errorf("reload without a session: %d to %q", resp.StatusCode, loc)
	}
	for next, want := range map[string]string{"/ui/stuck": "/ui/stuck", "https://evil.example/": "/ui/changes",
		"//evil.example/ui/": "/ui/changes", "/api/v1/changes": "/ui/changes", "/ui/\\evil": "/ui/changes"} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
	if code, _ := s.call(t, http.MethodPost, "/api/v1/changes", viewerToken, validChange("viewer")); code != http.StatusForbidden {
		t.Errorf("a viewer token submitted a change: %d, want 403", code)
	}
}

// TestStateWordsOnGitHub: a GitHub change's page speaks of its pull
// request, checks and deploy run, a GitLab one's of its merge request,
// pipeline and deploy pipeline.
func TestStateWordsOnGitHub(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		platform, status string
		iid              int64
		want             string
	}{
		{rules.PlatformGitHub, rules.StatusMRCreating, 4, "Pull request #4 is open; waiting for its checks."},
		{rules.PlatformGitHub, rules.StatusMerging, 4, "Merging pull request #4."},
		{rules.PlatformGitHub, rules.StatusMerged, 4, "Merged; waiting for the deploy run to apply it."},
		{rules.PlatformGitHub, rules.StatusMRCreating, 0, "Opening the pull request."},
		{rules.PlatformGitLab, rules.StatusMRCreated, 7, "Merge request !7 is open and its pipeline passed."},
		{rules.PlatformGitLab, rules.StatusValidated, 7, "Applied: merged and confirmed by the deploy pipeline."},
	} {
		v := templates.StatusView{Platform: tc.platform, Status: tc.status}
		v.MR.IID = tc.iid
		if got := stateWords(v); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.platform, tc.status, got, tc.want)
		}
	}
}
