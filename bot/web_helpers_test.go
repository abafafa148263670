package bot

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"changebot/api"
	"changebot/demo"
)

// viewerPage GETs path (with its query) of env's bot as the demo's viewer
// (a web session of demo.ViewerToken, which the demo configures) and returns
// the status and the body.
func viewerPage(t *testing.T, env *demo.Env, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, env.BaseURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: viewerSession(t, env)})
	resp, err := http.DefaultClient.Do(req)
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

// viewerSession logs in on env's /ui/login with demo.ViewerToken, as the
// login form does, and returns the session cookie's value.
func viewerSession(t *testing.T, env *demo.Env) string {
	t.Helper()
	return webSession(t, env, demo.ViewerToken)
}

// webSession logs in on env's /ui/login with token, as the login form
// does, and returns the session cookie's value.
func webSession(t *testing.T, env *demo.Env, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, env.BaseURL+"/ui/login",
		strings.NewReader(url.Values{"token": {token}, "next": {"/ui/changes"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", env.BaseURL)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == api.SessionCookie && c.Value != "" {
			return c.Value
		}
	}
	t.Fatalf("logging in: %d without a session cookie", resp.StatusCode)
	return ""
}
