package githubfake

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"changebot/internal/fixture"
)

// TestPullBaseChange (issue 21 point 1): PATCH .../pulls/{n} with base
// moves the pull request onto another existing branch (docs.github.com
// "Update a pull request", base), answers 200 with the new base, computes
// mergeability against it (the old base's required check no longer
// blocks), and sends the pull_request "edited" webhook with
// changes.base.ref.from and changes.base.sha.from, the old base and its
// tip. A base that does not exist, the head itself or a closed pull
// request answers 422. A title edit sends "edited" with changes.title.from,
// in the shape of the recorded delivery (webhook-pull_request-edited.json).
func TestPullBaseChange(t *testing.T) {
	t.Parallel()
	rv := &receiver{}
	hooks := httptest.NewServer(rv)
	t.Cleanup(hooks.Close)
	srv := New(Options{WebhookURL: hooks.URL})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken)
	repo := srv.AddRepo(RepoSpec{FullName: "acme/config", NoCI: true, RequiredContexts: []string{"ci/never"},
		Collaborators: map[string]string{"changebot": "write"}})
	e := &env{t: t, srv: srv, rv: rv}
	const api = "/repos/acme/config"
	mainSHA := srv.BranchSHA(repo.ID, "main")
	for _, b := range []string{"feature", "release"} {
		e.must(201, "POST", api+"/git/refs", robotToken, map[string]any{"ref": "refs/heads/" + b, "sha": mainSHA})
	}
	srv.PushToBranch(repo.ID, "feature", "changebot")
	e.must(201, "POST", api+"/pulls", robotToken, map[string]any{"title": "t", "head": "feature", "base": "main"})
	state := func() string {
		t.Helper()
		e.must(200, "GET", api+"/pulls/1", robotToken, nil) // the first read after a change answers null
		return e.must(200, "GET", api+"/pulls/1", robotToken, nil)["mergeable_state"].(string)
	}
	if got := state(); got != "blocked" {
		t.Fatalf("on main: mergeable_state %q, want blocked (ci/never is required there)", got)
	}

	refusals := []struct {
		name string
		body map[string]any
	}{
		{"a branch that does not exist", map[string]any{"base": "nope"}},
		{"the head itself", map[string]any{"base": "feature"}},
	}
	for _, tt := range refusals {
		if st, b := e.call("PATCH", api+"/pulls/1", robotToken, tt.body); st != 422 {
			t.Errorf("base %s: %d %s, want 422", tt.name, st, b)
		}
	}
	got := e.must(200, "PATCH", api+"/pulls/1", robotToken, map[string]any{"base": "release"})
	if ref := got["base"].(map[string]any)["ref"]; ref != "release" {
		t.Fatalf("answer's base.ref %v, want release", ref)
	}
	if pr, _ := srv.PullRequest(repo.ID, 1); pr.Base != "release" {
		t.Errorf("snapshot base %q, want release", pr.Base)
	}
	if got := state(); got != "clean" {
		t.Errorf("on release: mergeable_state %q, want clean", got)
	}
	e.must(200, "PATCH", api+"/pulls/1", robotToken, map[string]any{"title": "t, edited"})
	if err := srv.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	var hook struct {
		Changes struct {
			Base struct {
				Ref struct{ From string } `json:"ref"`
				SHA struct{ From string } `json:"sha"`
			} `json:"base"`
		} `json:"changes"`
		PullRequest struct {
			Base struct{ Ref string } `json:"base"`
		} `json:"pull_request"`
	}
	raw := rv.first(t, "pull_request", "edited", `"base":{"ref":{"from"`)
	if err := json.Unmarshal(raw, &hook); err != nil {
		t.Fatal(err)
	}
	if hook.Changes.Base.Ref.From != "main" || hook.Changes.Base.SHA.From != mainSHA || hook.PullRequest.Base.Ref != "release" {
		t.Errorf("edited webhook: changes.base %+v, pull_request.base.ref %q; want from main at %s, now release", hook.Changes.Base, hook.PullRequest.Base.Ref, mainSHA)
	}
	title := rv.first(t, "pull_request", "edited", `"title":{"from":"t"}`)
	if diff := fixture.Diff(t, fixture.GitHub(t, "webhook-pull_request-edited.json"), title,
		fixture.Check{Exceptions: fixture.Merge(notModelled, hookEnvelope), Match: fixture.Anywhere, Values: fixture.Exceptions{
			"pull_request.mergeable_state": "the fake's webhooks carry mergeable null and unknown after a change; the capture's edit came when GitHub had computed clean",
		}}); len(diff) > 0 {
		t.Errorf("title edited webhook differs from webhook-pull_request-edited.json:\n  %s", strings.Join(diff, "\n  "))
	}

	e.must(200, "PATCH", api+"/pulls/1", robotToken, map[string]any{"state": "closed"})
	if st, b := e.call("PATCH", api+"/pulls/1", robotToken, map[string]any{"base": "main"}); st != 422 {
		t.Errorf("base of a closed pull request: %d %s, want 422", st, b)
	}
}
