package api

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"changebot/flows/rules"
)

// post sends form as a browser on this server's page does (Origin and
// Sec-Fetch-Site naming the server, unless origin overrides them) with
// the session cookie, and returns the status, the Location and the body.
func (s *apiSetup) post(t *testing.T, cookie, path string, form url.Values, origin string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin == "" {
		req.Header.Set("Origin", s.srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	} else {
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: cookie})
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// TestWebActions: an operator's session retries, resumes and cancels from
// a change's page with a reason and a confirmation, through Engine.Act as
// the API does (actor the token's id, source web, the reason); a viewer
// gets 403, a form without its confirmation or reason a 400, a
// cross-origin POST a 403; none of those reach the engine.
func TestWebActions(t *testing.T) {
	t.Parallel()
	ok := url.Values{"reason": {"the registry is back"}, "confirm": {"yes"}}
	tests := []struct {
		name, token, action string
		form                url.Values
		origin              string
		code                int
		want                string
		acted               bool
	}{
		{"operator retries", operatorToken, "retry", ok, "", 303, "", true},
		{"operator cancels", operatorToken, "cancel", ok, "", 303, "", true},
		{"viewer refused", viewerToken, "retry", ok, "", 403, "may look but not act", false},
		{"submitter refused", submitterToken, "retry", ok, "", 403, "may look but not act", false},
		{"no confirmation", operatorToken, "retry", url.Values{"reason": {"x"}}, "", 400, "Tick the confirmation box", false},
		{"no reason", operatorToken, "retry", url.Values{"confirm": {"yes"}}, "", 400, "Give a reason", false},
		{"reason of two lines", operatorToken, "retry", url.Values{"reason": {"a\nb"}, "confirm": {"yes"}}, "", 400, "reason ", false},
		{"cross-origin", operatorToken, "retry", ok, "https://evil.example", 403, "", false},
		{"not applicable", operatorToken, "resume", ok, "", 409, "cannot resume", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := setup(t, "")
			id := s.changes.add(Change{SubjectID: "svc", TargetKey: "prod", Status: rules.StatusCreateFailed, Step: int(rules.CreateFailed)})
			session := s.login(t, tc.token)
			code, loc, body := s.post(t, session, "/ui/changes/"+id+"/"+tc.action, tc.form, tc.origin)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("POST %s: %d %s, want %d with %q", tc.action, code, body, tc.code, tc.want)
			}
			if code == 303 && loc != "/ui/changes/"+id+"?done="+tc.action {
				t.Errorf("redirected to %q, want the change's page", loc)
			}
			if acted := len(s.changes.acts) > 0; acted != tc.acted {
				t.Fatalf("the engine was asked %v, want asked: %v", s.changes.acts, tc.acted)
			}
			if tc.acted {
				a := s.changes.acts[0]
				if string(a.Action) != tc.action || a.Params.Actor != TokenID(tc.token) || a.Params.Source != "web" || a.Params.Reason != "the registry is back" {
					t.Errorf("the engine got %+v", a)
				}
			}
		})
	}
}

// TestWebChangeOffersTheActionsThatApply: an operator sees a form, with a
// reason and a confirmation, for each action the change's step allows,
// and none for a final change.
func TestWebChangeOffersTheActionsThatApply(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	failed := s.changes.add(Change{SubjectID: "a", TargetKey: "prod", Status: rules.StatusCreateFailed, Step: int(rules.CreateFailed)})
	parked := s.changes.add(Change{SubjectID: "b", TargetKey: "prod", Status: rules.StatusMerging, Step: int(rules.HandlePipelinePending)})
	done := s.changes.add(Change{SubjectID: "c", TargetKey: "prod", Status: rules.StatusValidated, Step: int(rules.CalledBack)})
	op := s.login(t, operatorToken)
	for id, want := range map[string][]string{failed: {"retry", "cancel"}, parked: {"resume", "cancel"}, done: nil} {
		_, body := s.page(t, op, "/ui/changes/"+id)
		for _, a := range []string{"retry", "resume", "cancel"} {
			has := strings.Contains(body, `id="form-`+a+`"`)
			wanted := strings.Contains(strings.Join(want, " "), a)
			if has != wanted {
				t.Errorf("%s: form %s shown %v, want %v", id, a, has, wanted)
			}
		}
		if want != nil && (!strings.Contains(body, `name="reason"`) || !strings.Contains(body, `name="confirm"`)) {
			t.Errorf("%s: the forms lack a reason or a confirmation", id)
		}
	}
}

// TestWebBulk: the bulk form counts the changes of the filter the action
// applies to before the confirmation; the POST acts on each with the
// reason; no filter, or a viewer, acts on nothing.
func TestWebBulk(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	var failed []string
	for _, subject := range []string{"a", "b", "c"} {
		failed = append(failed, s.changes.add(Change{SubjectID: subject, TargetKey: "prod", Project: "g/p",
			Status: rules.StatusCreateFailed, Step: int(rules.CreateFailed)}))
	}
	s.changes.add(Change{SubjectID: "d", TargetKey: "prod", Project: "g/p", Status: rules.StatusMerging, Step: int(rules.HandleStarted)})
	op := s.login(t, operatorToken)
	code, body := s.page(t, op, "/ui/bulk?action=retry&project=g/p")
	if code != 200 || !strings.Contains(body, "<strong>3</strong> changes of this filter can be retried; 1 other change") ||
		!strings.Contains(body, `id="bulk-form"`) {
		t.Fatalf("bulk form: %d\n%s", code, body)
	}
	// The list of a filter links its bulk actions with the filter as
	// query parameters, not as one escaped value.
	if _, body := s.page(t, op, "/ui/changes?project=g/p"); !strings.Contains(body, `<a href="/ui/bulk?action=retry&amp;project=g%2Fp" id="bulk-retry">`) {
		t.Errorf("the filtered list does not link the bulk retry of its filter:\n%s", body)
	}
	for _, q := range []string{"", "&limit=10", "&cursor=x&limit=1"} {
		if code, body := s.page(t, op, "/ui/bulk?action=retry"+q); code != 400 || !strings.Contains(body, "Choose a filter first") {
			t.Errorf("bulk with paging only (%q): %d\n%s", q, code, body)
		}
	}
	if code, _, _ := s.post(t, op, "/ui/bulk", url.Values{"action": {"retry"}, "limit": {"5"}, "reason": {"x"}, "confirm": {"yes"}}, ""); code != 400 ||
		len(s.changes.acts) != 0 {
		t.Fatalf("bulk POST with a limit only: %d, acts %v; want 400 and nothing done", code, s.changes.acts)
	}
	if code, _, _ := s.post(t, s.login(t, viewerToken), "/ui/bulk", url.Values{"action": {"retry"}, "project": {"g/p"},
		"reason": {"x"}, "confirm": {"yes"}}, ""); code != 403 || len(s.changes.acts) != 0 {
		t.Fatalf("viewer bulk: %d, acts %v", code, s.changes.acts)
	}
	code, _, body = s.post(t, op, "/ui/bulk", url.Values{"action": {"retry"}, "project": {"g/p"}, "reason": {"registry back"}, "confirm": {"yes"}}, "")
	if code != 200 || !strings.Contains(body, "retry: 3 changes done, 0 not.") {
		t.Fatalf("bulk retry: %d\n%s", code, body)
	}
	if len(s.changes.acts) != 3 {
		t.Fatalf("acts %v, want the 3 failed changes", s.changes.acts)
	}
	for i, a := range s.changes.acts {
		if a.Action != rules.ActionRetry || a.Params.Reason != "registry back" || !strings.Contains(strings.Join(failed, " "), a.ID) {
			t.Errorf("act %d: %+v", i, a)
		}
	}
}

// TestWebFreeze: an operator freezes a queue from the queues page with a
// reason (Queues.FreezeQueue as the API's), a viewer gets 403.
func TestWebFreeze(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	form := url.Values{"reason": {"release in progress"}, "confirm": {"yes"}}
	if code, _, _ := s.post(t, s.login(t, viewerToken), "/ui/queues/7/release/1.0/freeze", form, ""); code != 403 || len(s.queues.freezes) != 0 {
		t.Fatalf("viewer freeze: %d, %v", code, s.queues.freezes)
	}
	code, loc, body := s.post(t, s.login(t, operatorToken), "/ui/queues/7/release/1.0/freeze", form, "")
	if code != 303 || loc != "/ui/queues" {
		t.Fatalf("freeze: %d %s %s", code, loc, body)
	}
	if len(s.queues.freezes) != 1 || s.queues.freezes[0] != (fakeFreeze{ProjectID: 7, Branch: "release/1.0", Frozen: true,
		Actor: TokenID(operatorToken), Reason: "release in progress"}) {
		t.Errorf("freezes %+v", s.queues.freezes)
	}
}

// TestWebAttentionReadsOncePerTTL: many viewers reloading needs-attention
// within attentionTTL cost one read of its groups; after the TTL, or an
// action, it is read again.
func TestWebAttentionReadsOncePerTTL(t *testing.T) {
	t.Parallel()
	s := setup(t, "")
	s.changes.add(Change{SubjectID: "a", TargetKey: "prod", Status: rules.StatusCreateFailed, Step: int(rules.CreateFailed)})
	viewer := s.login(t, viewerToken)
	before := s.changes.lists
	for range 20 {
		if code, _ := s.page(t, viewer, "/ui/attention"); code != 200 {
			t.Fatal(code)
		}
	}
	if got := s.changes.lists - before; got != len(attentionGroups) {
		t.Errorf("20 views read the store %d times, want %d (one per group)", got, len(attentionGroups))
	}
	s.clock.Add(attentionTTL + time.Second)
	s.page(t, viewer, "/ui/attention")
	if got := s.changes.lists - before; got != 2*len(attentionGroups) {
		t.Errorf("after the TTL: %d reads, want %d", got, 2*len(attentionGroups))
	}
}
