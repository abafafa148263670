package gitlabfake

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// listMRDiffs serves GET /projects/:id/merge_requests/:iid/diffs
// (doc/api/merge_requests.md "List merge request diffs"; fixture
// api-mr-diffs-list.json): one entry per file the merge request changes,
// from the merge base of its target at the head's start (start_sha) to its
// head sha, as GitLab keeps the diff of a merge request's latest version
// (a merged one keeps its diff). A file deleted and one added with the same
// content are one rename (old_path the deleted, new_path the added,
// renamed_file true), as git's exact rename detection finds it. Sorted by
// new_path; offset pagination (per_page 20 by default, 100 at most).
func (s *Server) listMRDiffs(rc *reqCtx) {
	p, mr := s.mr(rc)
	if p == nil {
		return
	}
	r := p.repo
	head := r.commits[mr.sha]
	if head == nil {
		rc.paginate([]any{})
		return
	}
	var before map[string]string
	if base := r.commits[r.mergeBase(cmpOr(mr.startSHA, r.branches[mr.targetBranch]), mr.sha)]; base != nil {
		before = base.files
	}
	after := head.files
	type entry struct {
		oldPath, newPath              string
		newFile, deletedFile, renamed bool
	}
	var added, deleted []string
	var entries []entry
	for _, path := range slices.Sorted(maps.Keys(after)) {
		old, had := before[path]
		switch {
		case !had:
			added = append(added, path)
		case old != after[path]:
			entries = append(entries, entry{oldPath: path, newPath: path})
		}
	}
	for _, path := range slices.Sorted(maps.Keys(before)) {
		if _, still := after[path]; !still {
			deleted = append(deleted, path)
		}
	}
	for _, path := range added {
		if i := slices.IndexFunc(deleted, func(d string) bool { return before[d] == after[path] }); i >= 0 {
			entries = append(entries, entry{oldPath: deleted[i], newPath: path, renamed: true})
			deleted = slices.Delete(deleted, i, i+1)
			continue
		}
		entries = append(entries, entry{oldPath: path, newPath: path, newFile: true})
	}
	for _, path := range deleted {
		entries = append(entries, entry{oldPath: path, newPath: path, deletedFile: true})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.newPath, b.newPath) })
	items := make([]any, 0, len(entries))
	for _, e := range entries {
		aMode, bMode := "100644", "100644"
		if e.newFile {
			aMode = "0"
		}
		if e.deletedFile {
			bMode = "0"
		}
		oldText, newText := before[e.oldPath], after[e.newPath]
		if e.deletedFile {
			newText = ""
		}
		items = append(items, map[string]any{
			"old_path": e.oldPath, "new_path": e.newPath, "a_mode": aMode, "b_mode": bMode,
			"diff":      unifiedDiff(oldText, newText, e.newFile, e.deletedFile),
			"collapsed": false, "too_large": false,
			"new_file": e.newFile, "renamed_file": e.renamed, "deleted_file": e.deletedFile, "generated_file": false,
		})
	}
	rc.paginate(items)
}

// unifiedDiff is a whole-file hunk replacing oldText with newText: enough
// for a fake whose callers read paths, not hunks.
func unifiedDiff(oldText, newText string, created, deleted bool) string {
	if oldText == newText {
		return ""
	}
	lines := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	}
	o, n := lines(oldText), lines(newText)
	if created {
		o = nil
	}
	if deleted {
		n = nil
	}
	var b strings.Builder
	b.WriteString("@@ -" + hunkRange(len(o)) + " +" + hunkRange(len(n)) + " @@\n")
	for _, l := range o {
		b.WriteString("-" + l + "\n")
	}
	for _, l := range n {
		b.WriteString("+" + l + "\n")
	}
	return b.String()
}

// hunkRange is a unified diff range of n lines from line 1.
func hunkRange(n int) string {
	if n == 0 {
		return "0,0"
	}
	if n == 1 {
		return "1"
	}
	return "1," + strconv.Itoa(n)
}
