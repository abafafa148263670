package githubfake

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"changebot/internal/fixture"
)

// filesEnv is a repository with a commit on main (three files) and a pull
// request from feature, two commits on: a file edited, one removed, one
// moved, one added, and one created and removed again.
func filesEnv(t *testing.T) (*env, string) {
	t.Helper()
	srv := New(Options{})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken)
	srv.AddRepo(RepoSpec{FullName: "acme/config", Collaborators: map[string]string{"changebot": "write"}})
	e := &env{t: t, srv: srv}
	const api = "/repos/acme/config"
	commit := func(branch string, entries ...any) string {
		t.Helper()
		ref := e.must(200, "GET", api+"/git/ref/heads/"+branch, robotToken, nil)
		tip := ref["object"].(map[string]any)["sha"].(string)
		base := e.must(200, "GET", api+"/git/commits/"+tip, robotToken, nil)
		tree := e.must(201, "POST", api+"/git/trees", robotToken, map[string]any{"base_tree": base["tree"].(map[string]any)["sha"], "tree": entries})
		c := e.must(201, "POST", api+"/git/commits", robotToken, map[string]any{"message": "Change", "tree": tree["sha"], "parents": []any{tip}})
		e.must(200, "PATCH", api+"/git/refs/heads/"+branch, robotToken, map[string]any{"sha": c["sha"]})
		return c["sha"].(string)
	}
	file := func(path, content string) any {
		return map[string]any{"path": path, "mode": "100644", "type": "blob", "content": content}
	}
	gone := func(path string) any {
		return map[string]any{"path": path, "mode": "100644", "type": "blob", "sha": nil}
	}
	seed := commit("main", file("old/name.yaml", "keep: me\n"), file("edit.yaml", "a: 1\n"), file("gone.yaml", "bye\n"))
	e.must(201, "POST", api+"/git/refs", robotToken, map[string]any{"ref": "refs/heads/feature", "sha": seed})
	commit("feature", file("tmp.yaml", "t\n"), file("edit.yaml", "a: 2\n"))
	commit("feature", gone("tmp.yaml"), gone("gone.yaml"), gone("old/name.yaml"), file("new/name.yaml", "keep: me\n"), file("added.yaml", "x: 1\n"))
	e.must(201, "POST", api+"/pulls", robotToken, map[string]any{"title": "Change", "head": "feature", "base": "main"})
	return e, seed
}

// TestPullFiles checks GET .../pulls/{n}/files against the docs' example
// (testdata/github/api-pulls-list-files.json) and what it lists.
func TestPullFiles(t *testing.T) {
	t.Parallel()
	e, _ := filesEnv(t)
	st, body := e.call("GET", "/repos/acme/config/pulls/1/files", robotToken, nil)
	if st != http.StatusOK {
		t.Fatalf("GET files = %d: %s", st, body)
	}
	values := map[string]string{"[].status": "the scenario's pull request also modifies, renames and removes files; the docs example adds one"}
	if diff := fixture.Diff(t, fixture.GitHub(t, "api-pulls-list-files.json"), body, fixture.Check{Values: values}); len(diff) > 0 {
		t.Errorf("files differ from api-pulls-list-files.json:\n  %s", strings.Join(diff, "\n  "))
	}
	type entry struct {
		Filename         string `json:"filename"`
		Status           string `json:"status"`
		PreviousFilename string `json:"previous_filename"`
	}
	var got []entry
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := []entry{
		{Filename: "added.yaml", Status: "added"},
		{Filename: "edit.yaml", Status: "modified"},
		{Filename: "gone.yaml", Status: "removed"},
		{Filename: "new/name.yaml", Status: "renamed", PreviousFilename: "old/name.yaml"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("files = %+v\nwant %+v", got, want)
	}
	if st, body := e.call("GET", "/repos/acme/config/pulls/1/files?per_page=3&page=2", robotToken, nil); st != 200 || json.Unmarshal(body, &got) != nil || len(got) != 1 {
		t.Errorf("page 2 of 3 = %d, %s; want one entry", st, body)
	}
	if st, _ := e.call("GET", "/repos/acme/config/pulls/9/files", robotToken, nil); st != http.StatusNotFound {
		t.Errorf("files of a missing pull request = %d, want 404", st)
	}
}

// TestContents checks GET .../contents/{path} against the docs' example
// (testdata/github/api-repos-get-content-file.json): a file in base64 at a
// branch or commit, a directory as a list, 404 for a missing path or ref.
func TestContents(t *testing.T) {
	t.Parallel()
	e, seed := filesEnv(t)
	st, body := e.call("GET", "/repos/acme/config/contents/new/name.yaml?ref=feature", robotToken, nil)
	if st != http.StatusOK {
		t.Fatalf("GET contents = %d: %s", st, body)
	}
	if diff := fixture.Diff(t, fixture.GitHub(t, "api-repos-get-content-file.json"), body, fixture.Check{}); len(diff) > 0 {
		t.Errorf("contents differ from api-repos-get-content-file.json:\n  %s", strings.Join(diff, "\n  "))
	}
	decode := func(body []byte) string {
		var f struct{ Content, Encoding, Type string }
		_ = json.Unmarshal(body, &f)
		b, err := base64.StdEncoding.DecodeString(f.Content)
		if err != nil || f.Encoding != "base64" || f.Type != "file" {
			t.Errorf("content %s: %v", body, err)
		}
		return string(b)
	}
	if got := decode(body); got != "keep: me\n" {
		t.Errorf("content at feature = %q", got)
	}
	if _, body := e.call("GET", "/repos/acme/config/contents/gone.yaml?ref="+seed, robotToken, nil); decode(body) != "bye\n" {
		t.Errorf("content at the seed commit = %s", body)
	}
	st, body = e.call("GET", "/repos/acme/config/contents/new?ref=feature", robotToken, nil)
	var dir []map[string]any
	if err := json.Unmarshal(body, &dir); st != 200 || err != nil || len(dir) != 1 || dir[0]["path"] != "new/name.yaml" {
		t.Errorf("directory = %d %s; want a list of new/name.yaml", st, body)
	}
	for _, path := range []string{"gone.yaml?ref=feature", "edit.yaml?ref=nope", "missing"} {
		if st, _ := e.call("GET", "/repos/acme/config/contents/"+path, robotToken, nil); st != http.StatusNotFound {
			t.Errorf("GET contents/%s = %d, want 404", path, st)
		}
	}
}
