package bot

import (
	"io"
	"net/http"
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
	req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: api.SessionValue(demo.ViewerToken)})
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
