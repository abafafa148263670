package gitlab

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"changebot/platform"
)

// TestChangedPathsFromFixture decodes the docs' example of GET
// .../merge_requests/:iid/diffs (api-mr-diffs-list.json) through the
// adapter, over two pages (X-Next-Page), counting a renamed file's old and
// new path once each.
func TestChangedPathsFromFixture(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.on("GET /projects/42/merge_requests/7/diffs",
		answer{fixture: "api-mr-diffs-list.json", header: map[string]string{"X-Next-Page": "2", "X-Page": "1"}},
		answer{body: `[{"old_path":"a/old.yaml","new_path":"a/new.yaml","renamed_file":true},{"old_path":"VERSION","new_path":"VERSION"}]`, header: map[string]string{"X-Next-Page": "", "X-Page": "2"}},
	)
	c := newClient(t, s)
	got, err := c.ChangedPaths(t.Context(), 42, 7)
	if want := []string{"README", "VERSION", "a/new.yaml", "a/old.yaml"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("ChangedPaths = %q, %v; want %q", got, err, want)
	}
	reqs := s.seenRequests()
	if len(reqs) != 2 || !strings.Contains(reqs[0].query, "per_page=100") || !strings.Contains(reqs[1].query, "page=2") {
		t.Errorf("requests = %+v; want two pages of 100", reqs)
	}
}

// TestFileAt reads a raw file at a ref (client-go escapes the path's dots,
// as GitLab wants them) and translates GitLab's 404.
func TestFileAt(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.on("GET /projects/42/repository/files/%2Echangebot%2Eyml/raw", answer{body: "version: 1\n"}, answer{status: 404, body: `{"message":"404 File Not Found"}`})
	c := newClient(t, s)
	got, err := c.FileAt(t.Context(), 42, ".changebot.yml", "main")
	if err != nil || string(got) != "version: 1\n" {
		t.Fatalf("FileAt = %q, %v", got, err)
	}
	if q := s.seenRequests()[0].query; q != "ref=main" {
		t.Errorf("query = %q, want ref=main", q)
	}
	if _, err := c.FileAt(t.Context(), 42, ".changebot.yml", "main"); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("FileAt(missing) = %v, want ErrNotFound", err)
	}
}
