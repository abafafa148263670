package gitlab_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
)

// TestConformanceWebhookSetup drives the setup and doctor calls against the
// fake: token details, listing, creating, editing and testing a webhook,
// and a revoked reviewer token.
func TestConformanceWebhookSetup(t *testing.T) {
	t.Parallel()
	f := setup(t)
	expiry := time.Date(2027, 1, 31, 0, 0, 0, 0, time.UTC)
	f.srv.SetTokenInfo(robotToken, gitlabfake.TokenInfo{Scopes: []string{"api", "read_repository"}, ExpiresAt: expiry})
	ti, err := f.c.TokenInfo(t.Context())
	if err != nil || ti.UserID != f.robot.ID || !ti.ExpiresAt.Equal(expiry) || len(ti.Scopes) != 2 || !ti.Active {
		t.Fatalf("TokenInfo = %+v, %v; want the robot's token expiring %s", ti, err, expiry)
	}
	if ri, err := f.c.ReviewerTokenInfo(t.Context(), 1); err != nil || ri.UserID != f.revB.ID || !ri.ExpiresAt.IsZero() {
		t.Errorf("ReviewerTokenInfo(1) = %+v, %v; want reviewer-b's token, no expiry", ri, err)
	}
	f.srv.RevokeToken(reviewerTokenA)
	_, err = f.c.ReviewerTokenInfo(t.Context(), 0)
	requireStatus(t, err, 401, "401 Unauthorized")
	if !errors.Is(err, platform.ErrForbidden) {
		t.Errorf("a revoked token: %v, want platform.ErrForbidden", err)
	}

	var got []string
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got = append(got, r.Header.Get("X-Gitlab-Event")+" "+r.Header.Get("X-Gitlab-Token"))
		if r.Header.Get("X-Gitlab-Token") != "hook-secret" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid webhook token"}`))
		}
	}))
	t.Cleanup(bot.Close)
	owner := platform.HookOwner{ID: f.project.PathWithNamespace}
	if hs, err := f.c.Webhooks(t.Context(), owner); err != nil || len(hs) != 0 {
		t.Fatalf("Webhooks before = %v, %v", hs, err)
	}
	params := platform.WebhookParams{URL: bot.URL, Name: "changebot", Token: "hook-secret", Triggers: map[string]bool{
		platform.TriggerMergeRequests: true, platform.TriggerPipeline: true, platform.TriggerNote: true, platform.TriggerPush: false}}
	created, err := f.c.CreateWebhook(t.Context(), owner, params)
	if err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	hs, err := f.c.Webhooks(t.Context(), platform.HookOwner{ID: strconv.FormatInt(f.project.ID, 10)})
	if err != nil || len(hs) != 1 || hs[0].ID != created.ID || hs[0].Name != "changebot" || hs[0].AlertStatus != platform.WebhookExecutable ||
		!hs[0].Triggers[platform.TriggerPipeline] || hs[0].Triggers[platform.TriggerPush] {
		t.Fatalf("Webhooks after create = %+v, %v", hs, err)
	}
	err = f.c.TestWebhook(t.Context(), owner, created.ID, platform.TriggerMergeRequests)
	if !gitlab.ErrNoTestData(err) {
		t.Errorf("test without an MR: %v, want ErrNoTestData", err)
	}
	if err := f.c.TestWebhook(t.Context(), owner, created.ID, platform.TriggerPush); err != nil {
		t.Errorf("TestWebhook(push): %v", err)
	}
	params.URL, params.Token = bot.URL+"/", ""
	if _, err := f.c.UpdateWebhook(t.Context(), owner, created.ID, params); err != nil {
		t.Fatalf("UpdateWebhook: %v", err)
	}
	err = f.c.TestWebhook(t.Context(), owner, created.ID, platform.TriggerPush)
	requireStatus(t, err, 422, `{"error":"invalid webhook token"}`)
	if gitlab.ErrNoTestData(err) {
		t.Errorf("a refused delivery is not missing test data: %v", err)
	}
	if len(got) != 2 || got[0] != "Push Hook hook-secret" || got[1] != "Push Hook " {
		t.Errorf("deliveries %q: want the secret, then none after the URL changed without a token", got)
	}
	_, err = f.c.Webhooks(t.Context(), platform.HookOwner{Group: true, ID: "group"})
	requireStatus(t, err, 404, "404 Group Not Found")
}
