package bot

import (
	"context"
	"flag"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds Debian's headless Chromium (scripts/install-chromium.sh
// installs it; CHANGEBOT_CHROMIUM overrides). Without one the browser tests
// skip, except under CI=true, where they fail: CI must run them.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHANGEBOT_CHROMIUM"), "/usr/bin/chromium"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is missing and CI=true: run scripts/install-chromium.sh (.ci/run does) before the tests")
	}
	t.Skip("chromium is missing (run scripts/install-chromium.sh); the browser tests skip outside CI")
	return ""
}

// newBrowser starts a headless Chromium for the test, with a fresh profile
// and nothing reaching out to the network on its own (the closed network
// refuses those connections, and Chromium then stalls).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// artifactDir is where screenshots go: $TEST_ARTIFACTS, else go test's
// -test.outputdir, else the test's temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TEST_ARTIFACTS")
	if dir == "" {
		if f := flag.Lookup("test.outputdir"); f != nil {
			dir = f.Value.String()
		}
	}
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, "webui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves the full page as name under artifactDir and logs its
// path.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// TestWebPagesInBrowser (issue 13 points 2 and 3) drives the pages in
// headless Chromium against a running bot: a wrong token is refused on the
// login page, the viewer token logs in once (HttpOnly, SameSite=Strict
// cookie holding no token), the change's page shows its timeline after
// VALIDATED, the list shows the change and its filters narrow it, a bad
// filter is named, the stuck view leaves it out, and the status comment
// links the change's page. Screenshots: change.png and list.png.
func TestWebPagesInBrowser(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	dir := artifactDir(t)
	env := newTestEnv(t, true, 200*time.Millisecond)
	// The demo's configuration has the viewer token (demo.ViewerToken).
	startBot(t, env)
	ctx := context.Background()
	opID, err := demo.SubmitChange(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	view, err := demo.FollowChange(ctx, env, opID, 60*time.Second, func(api.ChangeView) {})
	if err != nil {
		t.Fatal(err)
	}
	pageURL := env.BaseURL + "/ui/changes/" + opID
	bctx, cancel := context.WithTimeout(browser, 60*time.Second)
	defer cancel()

	// Not logged in: the page leads to the login form; a wrong token is
	// refused there and sets no cookie.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(pageURL),
		chromedp.WaitVisible(chromedp.ID("token")),
	); err != nil {
		t.Fatalf("opening a page logged out: %v", err)
	}
	loc := run(t, bctx, chromedp.Location())
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("token"), "not-a-token"),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("error")),
	); err != nil {
		t.Fatalf("wrong token: %v", err)
	}
	errText := run(t, bctx, chromedp.Text(chromedp.ID("error")))
	html := run(t, bctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if !strings.Contains(loc, "/ui/login?next=") || errText != "That token is not valid." {
		t.Fatalf("wrong token: at %s, error %q", loc, errText)
	}
	if strings.Contains(html, "not-a-token") {
		t.Error("the login page renders the token it refused")
	}
	if c := browserCookies(t, bctx, env.BaseURL); len(c) != 0 {
		t.Errorf("a refused login set cookies: %v", c)
	}

	// The viewer token logs in and lands on the page it asked for.
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("token"), demo.ViewerToken),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("timeline")),
	); err != nil {
		t.Fatalf("viewer login: %v", err)
	}
	loc = run(t, bctx, chromedp.Location())
	state := run(t, bctx, chromedp.Text(chromedp.ID("state")))
	timeline := run(t, bctx, chromedp.Text(chromedp.ID("timeline")))
	html = run(t, bctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if loc != pageURL {
		t.Errorf("after login at %s, want %s", loc, pageURL)
	}
	if state != "Applied: merged and confirmed by the deploy pipeline." {
		t.Errorf("state %q", state)
	}
	for _, want := range []string{"submitted", "CALLED_BACK", "VALIDATED", "API request", "approval system callback", "carol"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("timeline lacks %q:\n%s", want, timeline)
		}
	}
	if !strings.Contains(html, view.MergeRequest.WebURL) {
		t.Errorf("the page does not link the merge request %s", view.MergeRequest.WebURL)
	}
	for _, secret := range []string{demo.ViewerToken, demo.APIToken, demo.OperatorToken, demo.CallbackSecret, demo.WebhookSecret} {
		if strings.Contains(html, secret) {
			t.Errorf("the change page renders a secret")
		}
	}
	screenshot(t, bctx, dir, "change.png")
	cookies := browserCookies(t, bctx, env.BaseURL)
	if len(cookies) != 1 || cookies[0].Name != api.SessionCookie || !cookies[0].HTTPOnly ||
		cookies[0].SameSite != network.CookieSameSiteStrict || strings.Contains(cookies[0].Value, demo.ViewerToken) {
		t.Errorf("session cookie %+v, want one HttpOnly SameSite=Strict %s without the token", cookies, api.SessionCookie)
	}

	// The list shows the change; its filters (a form, GET) narrow it.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(env.BaseURL+"/ui/changes"),
		chromedp.WaitVisible(chromedp.ID("changes")),
	); err != nil {
		t.Fatalf("list: %v", err)
	}
	if rows := run(t, bctx, chromedp.Text(chromedp.ID("changes"))); !strings.Contains(rows, opID) || !strings.Contains(rows, "VALIDATED") {
		t.Errorf("the list does not show %s as VALIDATED:\n%s", opID, rows)
	}
	screenshot(t, bctx, dir, "list.png")
	for _, tc := range []struct{ field, value string }{{"project", demo.Project}, {"status", "VALIDATED"}, {"subject_id", "payments-api"}} {
		if err := chromedp.Do(bctx,
			chromedp.Navigate(env.BaseURL+"/ui/changes"),
			chromedp.WaitVisible(chromedp.ID("changes")),
			chromedp.SendKeys(chromedp.CSS(`input[name="`+tc.field+`"]`), tc.value),
			chromedp.Click(chromedp.ID("filter")),
		); err != nil {
			t.Fatalf("filter %s=%s: %v", tc.field, tc.value, err)
		}
		waitLocation(t, bctx, tc.field+"="+url.QueryEscape(tc.value))
		if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.ID("changes"))); err != nil {
			t.Fatalf("filter %s=%s: %v", tc.field, tc.value, err)
		}
		if rows := run(t, bctx, chromedp.Text(chromedp.ID("changes"))); !strings.Contains(rows, opID) {
			t.Errorf("filter %s=%s hides %s", tc.field, tc.value, opID)
		}
	}
	for _, tc := range []struct{ field, value string }{{"project", "other/project"}, {"status", "MERGING"}, {"subject_id", "nobody"}} {
		if err := chromedp.Do(bctx,
			chromedp.Navigate(env.BaseURL+"/ui/changes"),
			chromedp.WaitVisible(chromedp.ID("changes")),
			chromedp.SendKeys(chromedp.CSS(`input[name="`+tc.field+`"]`), tc.value),
			chromedp.Click(chromedp.ID("filter")),
		); err != nil {
			t.Fatalf("filter %s=%s: %v", tc.field, tc.value, err)
		}
		waitLocation(t, bctx, tc.field+"="+url.QueryEscape(tc.value))
		if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.ID("empty"))); err != nil {
			t.Fatalf("filter %s=%s: %v", tc.field, tc.value, err)
		}
	}
	// A bad filter says what is wrong; needs attention does not list a
	// VALIDATED change (the old stuck view leads there).
	if err := chromedp.Do(bctx,
		chromedp.Navigate(env.BaseURL+"/ui/changes?updated_after=yesterday"),
		chromedp.WaitVisible(chromedp.ID("error")),
	); err != nil {
		t.Fatalf("bad filter: %v", err)
	}
	if msg := run(t, bctx, chromedp.Text(chromedp.ID("error"))); !strings.Contains(msg, "updated_after") {
		t.Errorf("bad filter error %q does not name updated_after", msg)
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(env.BaseURL+"/ui/stuck"),
		chromedp.WaitVisible(chromedp.ID("nothing")),
	); err != nil {
		t.Fatalf("needs attention: %v", err)
	}

	// The status comment links the page (it is refreshed after a short
	// delay).
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		note := env.StatusComment(view.MergeRequest.IID)
		if strings.Contains(note, "("+pageURL+")") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status comment does not link %s:\n%s", pageURL, note)
		}
	}
}

// run runs one browser action and returns its value, failing the test on
// an error.
func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitLocation waits until the page's URL contains want (a form's GET
// navigation has begun and ended), failing the test after 10 s.
func waitLocation(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Asked while the navigation swaps documents, the location is an
		// error ("Inspected target navigated or closed"): ask again.
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err == nil && strings.Contains(loc, want) {
			if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS("body"))); err != nil {
				t.Fatal(err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page stayed at %s (%v), want a URL with %s", loc, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// browserCookies lists the browser's cookies for the pages of base.
func browserCookies(t *testing.T, ctx context.Context, base string) []*network.Cookie {
	t.Helper()
	return run(t, ctx, func(ctx context.Context, tg *chromedp.Target) ([]*network.Cookie, error) {
		res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/ui/changes"}})
		if err != nil {
			return nil, err
		}
		return res.Cookies, nil
	})
}
