package githubfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestListsArePaged (issue 21 point 5): check runs and combined statuses
// are paged as GitHub pages them (docs.github.com "Using pagination in the
// REST API"): per_page at most 100 (a larger one answers 100), total_count
// counting every item, and a Link header with rel "next" and "last" while
// pages follow, "prev" and "first" after the first; the last page has no
// "next".
func TestListsArePaged(t *testing.T) {
	t.Parallel()
	srv := New(Options{})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken)
	repo := srv.AddRepo(RepoSpec{FullName: "acme/config", NoCI: true})
	sha := srv.BranchSHA(repo.ID, "main")
	for i := range 150 {
		srv.SetCheckRun(repo.ID, sha, fmt.Sprintf("check-%03d", i), "ci-app", "completed", "success")
		srv.SetStatus(repo.ID, sha, fmt.Sprintf("ci/%03d", i), "success")
	}
	get := func(t *testing.T, path string) (map[string]any, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+robotToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d, %v", path, resp.StatusCode, err)
		}
		return m, resp.Header.Get("Link")
	}
	base := "/repos/acme/config/commits/" + sha
	tests := []struct {
		name, path, list string
		wantItems        int
		wantRels         []string
		noRels           []string
	}{
		{"check runs, per_page over 100", base + "/check-runs?per_page=500", "check_runs", 100,
			[]string{`page=2&per_page=100>; rel="next"`, `page=2&per_page=100>; rel="last"`}, []string{`rel="prev"`, `rel="first"`}},
		{"check runs, last page", base + "/check-runs?per_page=100&page=2", "check_runs", 50,
			[]string{`page=1&per_page=100>; rel="prev"`, `page=1&per_page=100>; rel="first"`}, []string{`rel="next"`, `rel="last"`}},
		{"check runs, default 30", base + "/check-runs", "check_runs", 30,
			[]string{`page=2&per_page=30>; rel="next"`, `page=5&per_page=30>; rel="last"`}, nil},
		{"statuses, per_page over 100", base + "/status?per_page=1000", "statuses", 100,
			[]string{`page=2&per_page=100>; rel="next"`}, []string{`rel="prev"`}},
		{"statuses, last page", base + "/status?per_page=100&page=2", "statuses", 50,
			[]string{`rel="prev"`}, []string{`rel="next"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, link := get(t, tt.path)
			items, _ := m[tt.list].([]any)
			if len(items) != tt.wantItems || m["total_count"] != float64(150) {
				t.Errorf("%d %s, total_count %v; want %d of 150", len(items), tt.list, m["total_count"], tt.wantItems)
			}
			for _, rel := range tt.wantRels {
				if !strings.Contains(link, rel) {
					t.Errorf("Link %q lacks %s", link, rel)
				}
			}
			for _, rel := range tt.noRels {
				if strings.Contains(link, rel) {
					t.Errorf("Link %q has %s", link, rel)
				}
			}
		})
	}
}
