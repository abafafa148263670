package gitlab_test

import (
	"errors"
	"fmt"
	"testing"

	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
)

// TestTreeFiles lists a tree of 250 files and 251 directories under a
// directory with one request per page of 100 entries, ignores directories and files
// outside it, and answers platform.ErrNotFound for a directory that does
// not exist.
func TestTreeFiles(t *testing.T) {
	t.Parallel()
	srv := gitlabfake.New(gitlabfake.Options{})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken, gitlabfake.AsBot())
	files := map[string]string{"other/x.yaml": "x: 1"}
	for i := range 250 {
		files[fmt.Sprintf("services/payments/%03d/values.yaml", i)] = "a: 1"
	}
	p := srv.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "group/config",
		Members: map[string]int{"changebot": gitlabfake.AccessMaintainer}, Files: files})
	c, err := gitlab.New(gitlab.Config{BaseURL: srv.URL(), Token: robotToken})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.TreeFiles(t.Context(), p.ID, "main", "services")
	if err != nil {
		t.Fatalf("TreeFiles: %v", err)
	}
	if len(got) != 250 || !got["services/payments/042/values.yaml"] || got["services/payments/042"] || got["other/x.yaml"] {
		t.Errorf("TreeFiles(services) = %d files; want the 250 files under services and no directory", len(got))
	}
	if n := srv.CallCount("GET", "/api/v4/projects/*/repository/tree"); n != 6 {
		t.Errorf("%d tree requests; want 6 (501 entries, directories included, in pages of 100)", n)
	}
	root, err := c.TreeFiles(t.Context(), p.ID, "main", "")
	if err != nil || len(root) != 252 || !root["README.md"] {
		t.Errorf("TreeFiles(root) = %d files, %v; want 252 with README.md", len(root), err)
	}
	_, err = c.TreeFiles(t.Context(), p.ID, "main", "nowhere")
	if !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("TreeFiles(nowhere) err = %v; want ErrNotFound", err)
	}
}

// TestBranchCommits lists the commits of a branch that its base does not
// have, oldest first, with their full messages, and answers
// platform.ErrNotFound for a branch that does not exist.
func TestBranchCommits(t *testing.T) {
	t.Parallel()
	srv := gitlabfake.New(gitlabfake.Options{})
	t.Cleanup(srv.Close)
	srv.AddUser("changebot", robotToken, gitlabfake.AsBot())
	p := srv.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "group/config",
		Members: map[string]int{"changebot": gitlabfake.AccessMaintainer}})
	c, err := gitlab.New(gitlab.Config{BaseURL: srv.URL(), Token: robotToken})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateBranch(t.Context(), p.ID, "feature", "main"); err != nil {
		t.Fatal(err)
	}
	first := srv.Push(p.ID, "feature", "alice", "First\n\nchangebot operation op_1", map[string]string{"a.yaml": "a: 1"})
	second := srv.Push(p.ID, "feature", "alice", "Second", map[string]string{"a.yaml": "a: 2"})
	srv.PushToTarget(p.ID, "main") // the base moves on; its commit is not the branch's
	got, err := c.BranchCommits(t.Context(), p.ID, "main", "feature")
	if err != nil {
		t.Fatalf("BranchCommits: %v", err)
	}
	if len(got) != 2 || got[0].SHA != first || got[1].SHA != second || got[0].Message != "First\n\nchangebot operation op_1" {
		t.Errorf("BranchCommits = %+v; want %.8s (with its full message) then %.8s", got, first, second)
	}
	if _, err := c.BranchCommits(t.Context(), p.ID, "main", "nowhere"); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("BranchCommits(nowhere) err = %v; want ErrNotFound", err)
	}
}
