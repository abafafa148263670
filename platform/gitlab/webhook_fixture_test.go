package gitlab

import (
	"testing"
	"time"

	"changebot/internal/fixture"
	"changebot/platform"
)

// TestSetupCallsDecodeRealAnswers decodes GitLab's documented answers
// (testdata/gitlab) for the token, webhook and branch protection reads
// doctor makes.
func TestSetupCallsDecodeRealAnswers(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.on("GET /personal_access_tokens/self", answer{fixture: "api-pat-self.json"})
	hook := string(fixture.GitLab(t, "api-project-hook-get.json"))
	disabled := `{"id": 2, "url": "https://bot/webhooks/gitlab", "merge_requests_events": true,
		"alert_status": "temporarily_disabled", "disabled_until": "2026-12-01T10:00:00.000Z"}`
	s.on("GET /projects/group%2Fapp/hooks", answer{body: "[" + hook + "," + disabled + "]"})
	s.on("GET /projects/42/protected_branches/main", answer{fixture: "api-protected-branch-get.json"})
	c := newClient(t, s)
	if level, protected, err := c.MergeAccessLevel(t.Context(), 42, "main"); err != nil || !protected || level != 40 {
		t.Errorf("MergeAccessLevel = %d, %t, %v; want the documented Maintainers (40), protected", level, protected, err)
	}
	ti, err := c.TokenInfo(t.Context())
	if err != nil || ti.UserID != 3 || ti.Name != "Test Token" || !ti.ExpiresAt.IsZero() || !ti.Active || ti.Scopes[0] != "api" {
		t.Errorf("TokenInfo = %+v, %v", ti, err)
	}
	hs, err := c.Webhooks(t.Context(), platform.HookOwner{ID: "group/app"})
	if err != nil || len(hs) != 2 {
		t.Fatalf("Webhooks = %+v, %v", hs, err)
	}
	if h := hs[0]; h.URL != "http://example.com/hook" || h.AlertStatus != platform.WebhookExecutable || !h.Triggers[platform.TriggerNote] || !h.DisabledUntil.IsZero() {
		t.Errorf("documented hook decoded as %+v", h)
	}
	if h := hs[1]; h.AlertStatus != platform.WebhookTemporarilyDisabled || !h.DisabledUntil.Equal(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("disabled hook decoded as %+v", h)
	}
	if r := s.seenRequests()[2]; r.query != "per_page=100" {
		t.Errorf("hooks listed with %q, want one page of 100 (GitLab's limit)", r.query)
	}
}
