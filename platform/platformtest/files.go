package platformtest

import (
	"fmt"
	"path"
	"slices"
	"testing"

	"changebot/platform"
)

// files checks the repository reads of issue 25: FileAt at a branch and at
// a commit, and a missing file, ref and merge request; ChangedPaths over
// more than one page, counting a moved file's old and new path and leaving
// out a file the branch created and deleted again (the diff is the
// merge request's, not its commits').
func files(t *testing.T, e *Env) {
	ctx, a, pid := t.Context(), e.Adapter, e.ProjectID
	tree, err := a.TreeFiles(ctx, pid, e.DefaultBranch, "")
	if err != nil || len(tree) == 0 {
		t.Fatalf("TreeFiles(%s) = %v, %v; want the default branch's files", e.DefaultBranch, tree, err)
	}
	existing := slices.Sorted(func(yield func(string) bool) {
		for p := range tree {
			if !yield(p) {
				return
			}
		}
	})[0]
	content, err := a.FileAt(ctx, pid, existing, e.DefaultBranch)
	if err != nil {
		t.Fatalf("FileAt(%s, %s): %v", existing, e.DefaultBranch, err)
	}
	_, err = a.FileAt(ctx, pid, ".changebot.yml", e.DefaultBranch)
	e.requireKind(t, "FileAt(missing file)", err, platform.ErrNotFound)
	_, err = a.FileAt(ctx, pid, existing, "no-such-branch")
	e.requireKind(t, "FileAt(missing ref)", err, platform.ErrNotFound)

	const branch = "changebot/op_01FILES"
	if _, err := a.CreateBranch(ctx, pid, branch, e.DefaultBranch); err != nil {
		t.Fatalf("CreateBranch: %v", err)
	}
	first, err := a.CreateCommit(ctx, pid, platform.CommitParams{Branch: branch, Message: "Add the policy",
		Actions: []platform.FileAction{
			{Action: "create", FilePath: ".changebot.yml", Content: "version: 1\n"},
			{Action: "create", FilePath: "tmp/scratch.yaml", Content: "scratch: true\n"},
		}})
	if err != nil {
		t.Fatalf("CreateCommit(first): %v", err)
	}
	moved := path.Join("moved", path.Base(existing))
	second := []platform.FileAction{
		{Action: "delete", FilePath: "tmp/scratch.yaml"},
		{Action: "delete", FilePath: existing},
		{Action: "create", FilePath: moved, Content: string(content)},
		{Action: "update", FilePath: ".changebot.yml", Content: "version: 1\npaths: []\n"},
	}
	want := []string{".changebot.yml", existing, moved}
	const bulk = 101 // one more than a page of 100
	for i := range bulk {
		p := fmt.Sprintf("bulk/f%03d.yaml", i)
		second = append(second, platform.FileAction{Action: "create", FilePath: p, Content: fmt.Sprintf("n: %d\n", i)})
		want = append(want, p)
	}
	slices.Sort(want)
	if _, err := a.CreateCommit(ctx, pid, platform.CommitParams{Branch: branch, Message: "Move and add", Actions: second}); err != nil {
		t.Fatalf("CreateCommit(second): %v", err)
	}

	for _, tc := range []struct{ ref, path, want string }{
		{branch, ".changebot.yml", "version: 1\npaths: []\n"},
		{first.SHA, ".changebot.yml", "version: 1\n"},
		{first.SHA, "tmp/scratch.yaml", "scratch: true\n"},
		{branch, moved, string(content)},
	} {
		if got, err := a.FileAt(ctx, pid, tc.path, tc.ref); err != nil || string(got) != tc.want {
			t.Errorf("FileAt(%s, %s) = %q, %v; want %q", tc.path, tc.ref, got, err, tc.want)
		}
	}
	_, err = a.FileAt(ctx, pid, "tmp/scratch.yaml", branch)
	e.requireKind(t, "FileAt(deleted file)", err, platform.ErrNotFound)
	_, err = a.FileAt(ctx, pid, "bulk", branch)
	e.requireKind(t, "FileAt(directory)", err, platform.ErrNotFound)

	mr, err := a.CreateMergeRequest(ctx, pid, platform.CreateMRParams{SourceBranch: branch, TargetBranch: e.DefaultBranch, Title: "Move and add"})
	if err != nil {
		t.Fatalf("CreateMergeRequest: %v", err)
	}
	got, err := a.ChangedPaths(ctx, pid, mr.IID)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ChangedPaths = %d paths %q, %v;\nwant %d paths %q", len(got), got, err, len(want), want)
	}
	_, err = a.ChangedPaths(ctx, pid, mr.IID+1000)
	e.requireKind(t, "ChangedPaths(missing merge request)", err, platform.ErrNotFound)
}
