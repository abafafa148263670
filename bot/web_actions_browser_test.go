package bot

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"changebot/api"
	"changebot/demo"
	"changebot/platform/gitlab/gitlabfake"
)

// TestOperatorRetriesFromTheBrowser (issue 23): a change whose pipeline
// failed shows under needs attention with its reason, and on the
// overview; a viewer sees it but gets no form and a 403 for a POST, and
// sees the (empty) queues; a cross-origin POST with an operator's session
// is refused; the operator's bulk retry form counts it before anything is
// done; the operator retries it from its page with a reason, which the
// change's history and its status comment record, and the change reaches
// VALIDATED. Screenshots: overview.png,
// attention.png, change-failed.png.
func TestOperatorRetriesFromTheBrowser(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	dir := artifactDir(t)
	env := newTestEnv(t, true, 200*time.Millisecond)
	env.GitLab.SetPipelineScript(env.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed", "success"}, Duration: 100 * time.Millisecond})
	startBot(t, env)
	ctx := context.Background()
	opID, err := demo.SubmitChange(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	waitStep(t, env, opID, "CREATE_PIPELINE_FAILED", 60*time.Second)
	bctx, cancel := context.WithTimeout(browser, 90*time.Second)
	defer cancel()
	login := func(token string) {
		t.Helper()
		if err := chromedp.Do(bctx,
			chromedp.Navigate(env.BaseURL+"/ui/logout"),
			chromedp.Navigate(env.BaseURL+"/ui/login?next=/ui/attention"),
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), token),
			chromedp.Click(chromedp.ID("login")),
			chromedp.WaitVisible(chromedp.ID("group-failed")),
		); err != nil {
			t.Fatalf("logging in: %v", err)
		}
	}

	// The viewer: the failed change is under needs attention, with its
	// reason on its page, and no form.
	login(demo.ViewerToken)
	failed := run(t, bctx, chromedp.Text(chromedp.ID("group-failed")))
	if !strings.Contains(failed, opID) || !strings.Contains(failed, "CREATE_PIPELINE_FAILED") || !strings.Contains(failed, "Chosen by:") {
		t.Fatalf("needs attention does not list %s as failed:\n%s", opID, failed)
	}
	screenshot(t, bctx, dir, "attention.png")
	if err := chromedp.Do(bctx, chromedp.Navigate(env.BaseURL+"/ui"), chromedp.WaitVisible(chromedp.ID("health"))); err != nil {
		t.Fatalf("overview: %v", err)
	}
	if byStatus := run(t, bctx, chromedp.Text(chromedp.ID("by-status"))); !strings.Contains(strings.Join(strings.Fields(byStatus), " "), "1 CREATE_FAILED") {
		t.Errorf("the overview does not count the failed change: %q", byStatus)
	}
	screenshot(t, bctx, dir, "overview.png")
	if err := chromedp.Do(bctx, chromedp.Navigate(env.BaseURL+"/ui/changes/"+opID), chromedp.WaitVisible(chromedp.ID("checklist"))); err != nil {
		t.Fatalf("change page: %v", err)
	}
	if stopped := run(t, bctx, chromedp.Text(chromedp.CSS(`#checklist li.failed`))); !strings.HasPrefix(stopped, "pipeline: pipeline") {
		t.Errorf("the checklist's stopped line is %q, want the pipeline with its failure", stopped)
	}
	if ro := run(t, bctx, chromedp.Text(chromedp.ID("actions-readonly"))); !strings.Contains(ro, "Retry") {
		t.Errorf("the viewer is not told that Retry applies: %q", ro)
	}
	screenshot(t, bctx, dir, "change-failed.png")
	form := url.Values{"reason": {"runner fixed"}, "confirm": {"yes"}}
	if code := webPost(t, env, viewerSession(t, env), "/ui/changes/"+opID+"/retry", form, ""); code != http.StatusForbidden {
		t.Errorf("a viewer's retry: %d, want 403", code)
	}
	operator := webSession(t, env, demo.OperatorToken)
	if code := webPost(t, env, operator, "/ui/changes/"+opID+"/retry", form, "http://evil.example"); code != http.StatusForbidden {
		t.Errorf("a cross-origin retry: %d, want 403", code)
	}
	if v, _ := demo.GetChange(ctx, env, opID); v.Step.Name != "CREATE_PIPELINE_FAILED" {
		t.Fatalf("a refused POST moved the change to %s", v.Step.Name)
	}

	if err := chromedp.Do(bctx, chromedp.Navigate(env.BaseURL+"/ui/queues"), chromedp.WaitVisible(chromedp.ID("empty"))); err != nil {
		t.Fatalf("queues page: %v", err)
	}

	// The operator: the list of failed changes offers a bulk retry, whose
	// page counts the change before anything is done; then the operator
	// retries the one change from its page, with a reason.
	login(demo.OperatorToken)
	if err := chromedp.Do(bctx,
		chromedp.Navigate(env.BaseURL+"/ui/changes?status=CREATE_FAILED"),
		chromedp.WaitVisible(chromedp.ID("bulk")),
		chromedp.Click(chromedp.ID("bulk-retry")),
		chromedp.WaitVisible(chromedp.ID("count")),
	); err != nil {
		t.Fatalf("bulk retry form: %v", err)
	}
	if count := run(t, bctx, chromedp.Text(chromedp.ID("count"))); !strings.HasPrefix(count, "1 change of this filter can be retried") {
		t.Errorf("the bulk form says %q, want 1 change to retry", count)
	}
	if v, _ := demo.GetChange(ctx, env, opID); v.Step.Name != "CREATE_PIPELINE_FAILED" {
		t.Fatalf("opening the bulk form moved the change to %s", v.Step.Name)
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(env.BaseURL+"/ui/changes/"+opID),
		chromedp.WaitVisible(chromedp.ID("form-retry")),
		chromedp.SendKeys(chromedp.ID("reason-retry"), "runner fixed"),
		chromedp.Click(chromedp.ID("confirm-retry")),
		chromedp.Click(chromedp.ID("do-retry")),
		chromedp.WaitVisible(chromedp.ID("done")),
	); err != nil {
		t.Fatalf("retry from the page: %v", err)
	}
	waitStep(t, env, opID, "CALLED_BACK", 60*time.Second)
	v, err := demo.GetChange(ctx, env, opID)
	if err != nil {
		t.Fatal(err)
	}
	recorded := false
	for _, ev := range v.Events {
		var p struct {
			Command, Reason string
		}
		_ = json.Unmarshal(ev.Payload, &p)
		if p.Command == "retry" && p.Reason == "runner fixed" && ev.Actor == api.TokenID(demo.OperatorToken) && ev.Source == "web" {
			recorded = true
		}
	}
	if !recorded {
		t.Errorf("no retry event by the operator's token from the web with the reason: %+v", v.Events)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		note := env.StatusComment(v.MergeRequest.IID)
		if strings.Contains(note, "retried by token "+strings.TrimPrefix(api.TokenID(demo.OperatorToken), "api:")+": runner fixed | web page |") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status comment does not record the retry and its reason:\n%s", note)
		}
	}
}

// webPost POSTs form to path of env's bot with the session cookie, as a
// page of the bot does (Origin and Sec-Fetch-Site naming it) or, with
// origin set, as a page of that other site; it returns the status.
func webPost(t *testing.T, env *demo.Env, session, path string, form url.Values, origin string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, env.BaseURL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: session})
	if origin == "" {
		req.Header.Set("Origin", env.BaseURL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	} else {
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
