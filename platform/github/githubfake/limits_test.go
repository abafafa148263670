package githubfake

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBodyLimits (issue 21 point 3): a pull request body or an issue
// comment longer than GitHub's 65,536 characters answers 422 Validation
// Failed "body is too long (maximum is 65536 characters)"; one at the
// limit, counted in characters (not bytes), is accepted.
func TestBodyLimits(t *testing.T) {
	t.Parallel()
	srv := New(Options{})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken)
	repo := srv.AddRepo(RepoSpec{FullName: "acme/config", NoCI: true, Collaborators: map[string]string{"changebot": "write"}})
	e := &env{t: t, srv: srv}
	const api = "/repos/acme/config"
	e.must(201, "POST", api+"/git/refs", robotToken, map[string]any{"ref": "refs/heads/feature", "sha": srv.BranchSHA(repo.ID, "main")})
	srv.PushToBranch(repo.ID, "feature", "changebot")
	long := func(n int) string { return strings.Repeat("é", n) } // two bytes each
	pull := func(body string) map[string]any {
		return map[string]any{"title": "t", "head": "feature", "base": "main", "body": body}
	}
	tests := []struct {
		name, method, path string
		body               map[string]any
		want               int
		wantResource       string
	}{
		{"pull body over", "POST", api + "/pulls", pull(long(MaxBodyChars + 1)), 422, "PullRequest"},
		{"pull body at the limit", "POST", api + "/pulls", pull(long(MaxBodyChars)), 201, ""},
		{"pull body edit over", "PATCH", api + "/pulls/1", map[string]any{"body": long(MaxBodyChars + 1)}, 422, "PullRequest"},
		{"comment over", "POST", api + "/issues/1/comments", map[string]any{"body": long(MaxBodyChars + 1)}, 422, "IssueComment"},
		{"comment at the limit", "POST", api + "/issues/1/comments", map[string]any{"body": long(MaxBodyChars)}, 201, ""},
		{"comment edit over", "PATCH", api + "/issues/comments/3001", map[string]any{"body": long(MaxBodyChars + 1)}, 422, "IssueComment"},
	}
	for _, tt := range tests { // in order: the pull request and the comment exist for the edits
		st, b := e.call(tt.method, tt.path, robotToken, tt.body)
		if st != tt.want {
			t.Fatalf("%s: %d, want %d: %.300s", tt.name, st, tt.want, b)
		}
		if tt.want != 422 {
			continue
		}
		var got struct {
			Message string `json:"message"`
			Errors  []struct {
				Resource, Code, Field, Message string
			} `json:"errors"`
		}
		if err := json.Unmarshal(b, &got); err != nil || got.Message != "Validation Failed" || len(got.Errors) != 1 ||
			got.Errors[0].Resource != tt.wantResource || got.Errors[0].Field != "body" ||
			got.Errors[0].Message != "body is too long (maximum is 65536 characters)" {
			t.Errorf("%s: answer %s", tt.name, b)
		}
	}
	if cs := srv.Comments(repo.ID, 1); len(cs) != 1 || len([]rune(cs[0].Body)) != MaxBodyChars {
		t.Errorf("comments: %d, want the one at the limit, unchanged", len(cs))
	}
}
