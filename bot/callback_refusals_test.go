package bot

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/ops"
	"changebot/platform/approval/approvalfake"
	"changebot/store"
	"changebot/webhooks"
)

// TestRefusedApprovalCallbackShowsInTheHint: when the approval system signs
// its callbacks with another key than callback_secret, its decision is
// refused (401) and the change stays in APPROVAL_SENT; the hint of the
// change (single and list API) then says that a callback was refused for a
// bad signature and what to check, instead of only "waiting for an
// approver". Doctor, an hour later, warns of the change waiting in
// APPROVAL_SENT and names callback_secret.
func TestRefusedApprovalCallbackShowsInTheHint(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 100*time.Millisecond)
	ap := approvalfake.New(approvalfake.Options{Secret: "not-" + demo.CallbackSecret, AutoDecision: "approved"})
	t.Cleanup(ap.Close)
	env.Config.ApprovalURL = ap.URL()
	_, sc := startBot(t, env)
	opID, err := demo.SubmitChange(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(ap.Results()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the approval system never called back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The approval system may call back (refused) before the bot has
	// recorded APPROVAL_SENT, which it writes once the request's answer is
	// in: wait for that step, failing on any other.
	var view api.ChangeView
	for {
		httpJSON(t, "GET", env.BaseURL+"/api/v1/changes/"+opID, "Bearer "+demo.APIToken, "", http.StatusOK, &view)
		if view.Status != store.StatusApprovalSending || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if view.Status != store.StatusApprovalSent {
		t.Fatalf("status %s, want %s (the refused decision must not move it)", view.Status, store.StatusApprovalSent)
	}
	for _, want := range []string{"Waiting for an approver", "1 approval callback was refused for a bad signature since", "callback_secret"} {
		if !strings.Contains(view.Hint, want) {
			t.Errorf("hint %q does not say %q", view.Hint, want)
		}
	}
	var page api.ChangeListPage
	httpJSON(t, "GET", env.BaseURL+"/api/v1/changes?status=APPROVAL_SENT", "Bearer "+demo.APIToken, "", http.StatusOK, &page)
	if len(page.Changes) != 1 || !strings.Contains(page.Changes[0].Hint, "refused for a bad signature") {
		t.Errorf("the list's hint does not say the callback was refused: %+v", page.Changes)
	}

	now := func() time.Time { return time.Now().Add(ops.ApprovalWaitWarning + time.Minute) }
	checks := ops.RunDoctor(context.Background(), env.Config, &ops.DoctorOpts{Schema: sc.Name, NowFunc: now})
	if w := lines(levels(checks, ops.CheckWarn)); !strings.Contains(w, "1 change(s) wait in APPROVAL_SENT") || !strings.Contains(w, "callback_secret") {
		t.Errorf("doctor does not warn of the change waiting in APPROVAL_SENT naming callback_secret:\n%s", lines(checks))
	}
}

// TestOnlyABadSignatureCountsAsARefusedCallback: a POST /callbacks/approval
// without a signature (a scanner) or with a malformed one is refused (401)
// but does not make the hint of every waiting change blame callback_secret;
// one with a well-formed signature made with another key does count.
func TestOnlyABadSignatureCountsAsARefusedCallback(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, 100*time.Millisecond)
	app, _ := startBot(t, env)
	body := `{"request_id":"r1","operation_id":"op","decision":"approved","approver":"carol"}`
	post := func(signature string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, env.BaseURL+"/callbacks/approval", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if signature != "" {
			req.Header.Set(webhooks.HeaderTimestamp, strconv.FormatInt(time.Now().Unix(), 10))
			req.Header.Set(webhooks.HeaderSignature, signature)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("answer %d, want 401", resp.StatusCode)
		}
	}
	post("")
	post("sha256=not-hex")
	if h := app.refusals.ApprovalHint(store.StatusApprovalSent, "Waiting."); h != "Waiting." {
		t.Errorf("after unsigned and malformed POSTs the hint is %q, want it unchanged", h)
	}
	post(webhooks.Sign("not-"+demo.CallbackSecret, time.Now().Unix(), []byte(body)))
	if h := app.refusals.ApprovalHint(store.StatusApprovalSent, "Waiting."); !strings.Contains(h, "1 approval callback was refused for a bad signature") {
		t.Errorf("after a POST signed with another key the hint is %q, want it to count 1 refusal", h)
	}
}
