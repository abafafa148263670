package githubfake

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"changebot/internal/fixture"
)

// otherHeaders are the headers of GitHub's recorded answers the fake does
// not send, each with its reason; every other recorded header it must.
var otherHeaders = map[string]string{
	"server": "names GitHub's front end", "date": "net/http sends it", "connection": "the transport's",
	"content-length": "net/http sends it for the fake's small answers",
	"cache-control":  "the fake has no caches", "vary": "the fake has no caches", "etag": "the fake has no conditional requests",
	"x-oauth-scopes": "the fake's tokens have no OAuth scopes", "x-accepted-oauth-scopes": "the same",
	"access-control-expose-headers": "CORS: the fake serves no browser", "access-control-allow-origin": "the same",
	"strict-transport-security": "the fake serves plain HTTP", "x-frame-options": "browser security headers",
	"x-content-type-options": "the same", "x-xss-protection": "the same", "referrer-policy": "the same",
	"content-security-policy": "the same",
}

// TestRecordedExchanges (issue 21 point 18): each live exchange recorded
// with api.github.com (testdata/github/api-real-*.exchange.json) is
// replayed against the fake in the same situation: the fake answers the
// recorded status, a body of the recorded shape (types, and the enum
// values of the recorded situation) and the recorded headers that carry
// meaning (rate limits, request id, media type, Location).
func TestRecordedExchanges(t *testing.T) {
	t.Parallel()
	srv := New(Options{})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken)
	repo := srv.AddRepo(RepoSpec{FullName: "acme/config", NoCI: true, Collaborators: map[string]string{"changebot": "write"}})
	const api = "/repos/acme/config"
	first := srv.BranchSHA(repo.ID, "main")
	child := srv.PushToBranch(repo.ID, "main", "changebot")
	// As in the recording: two statuses of different contexts, the first failed.
	srv.SetStatus(repo.ID, child, "example/1", "failure")
	srv.SetStatus(repo.ID, child, "example/2", "success")
	tests := []struct {
		file string
		// request is the replayed request: the recorded one with the
		// fake's names and shas, or (validation) one the fake models.
		method, path string
		body         map[string]any
	}{
		// create-ref: test at the first commit, as recorded.
		{"api-real-git-create-ref.exchange.json", "POST", api + "/git/refs", map[string]any{"ref": "refs/heads/test", "sha": first}},
		// update-ref: test fast-forwarded to its child, without force.
		{"api-real-git-update-ref.exchange.json", "PATCH", api + "/git/refs/heads/test", map[string]any{"sha": child}},
		{"api-real-combined-status.exchange.json", "GET", api + "/commits/" + child + "/status", nil},
		// The recording creates a label with an invalid color; the fake
		// has no labels: a pull request from a head that does not exist
		// fails validation the same way.
		{"api-real-422-validation-failed.exchange.json", "POST", api + "/pulls", map[string]any{"title": "t", "head": "nope", "base": "main"}},
	}
	for _, tt := range tests { // in order: update-ref moves the ref create-ref made
		rec := fixture.GitHubExchange(t, tt.file)
		if !strings.EqualFold(rec.Method, tt.method) {
			t.Fatalf("%s: recorded %s, replayed %s", tt.file, rec.Method, tt.method)
		}
		var rd io.Reader
		if tt.body != nil {
			b, _ := json.Marshal(tt.body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequestWithContext(t.Context(), tt.method, srv.URL()+tt.path, rd)
		req.Header.Set("Authorization", "Bearer "+robotToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != rec.Status {
			t.Errorf("%s: the fake answered %d, GitHub %d: %s", tt.file, resp.StatusCode, rec.Status, got)
			continue
		}
		if diff := fixture.Diff(t, rec.Response, got, fixture.Check{}); len(diff) > 0 {
			t.Errorf("%s: the fake's answer differs from GitHub's:\n  %s", tt.file, strings.Join(diff, "\n  "))
		}
		for i := 0; i+1 < len(rec.RawHeaders); i += 2 {
			name := strings.ToLower(rec.RawHeaders[i])
			if _, ok := otherHeaders[name]; !ok && resp.Header.Get(name) == "" {
				t.Errorf("%s: the fake sends no %s (GitHub sent %q)", tt.file, rec.RawHeaders[i], rec.RawHeaders[i+1])
			}
		}
	}
}
