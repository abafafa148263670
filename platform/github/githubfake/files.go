package githubfake

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// getContents answers GET /repos/{owner}/{repo}/contents/{path...}?ref=
// (docs.github.com "Get repository content"; fixture
// api-repos-get-content-file.json): a file as an object with its content
// in base64 (encoding "base64"), a directory as an array of its direct
// entries (type "file" or "dir"), 404 "Not Found" for a path or ref that
// does not exist. ref defaults to the default branch.
func (s *Server) getContents(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	ref := rc.query("ref")
	if ref == "" {
		ref = r.DefaultBranch
	}
	c := s.resolve(r, ref)
	if c == nil {
		rc.fail(http.StatusNotFound, "No commit found for the ref "+ref)
		return
	}
	path := strings.Trim(rc.param("path"), "/")
	tree := s.objects.trees[c.tree]
	if blob, ok := tree[path]; ok {
		rc.json(http.StatusOK, s.contentJSON(r, ref, path, "file", blob, true))
		return
	}
	entries := map[string]string{} // name -> type
	prefix := path + "/"
	for p := range tree {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		if name, _, deeper := strings.Cut(rest, "/"); deeper {
			entries[name] = "dir"
		} else {
			entries[name] = "file"
		}
	}
	if path == "" || len(entries) == 0 {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	list := []any{}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		p := prefix + name
		list = append(list, s.contentJSON(r, ref, p, entries[name], tree[p], false))
	}
	rc.json(http.StatusOK, list)
}

// contentJSON is one content object; a file's content only when withContent.
func (s *Server) contentJSON(r *repo, ref, path, typ, blob string, withContent bool) map[string]any {
	name := path[strings.LastIndex(path, "/")+1:]
	self := s.repoAPI(r) + "/contents/" + path + "?ref=" + url.QueryEscape(ref)
	html := s.repoHTML(r) + "/blob/" + ref + "/" + path
	git := s.repoAPI(r) + "/git/blobs/" + blob
	out := map[string]any{
		"type": typ, "size": len(s.objects.blobs[blob]), "name": name, "path": path, "sha": blob,
		"url": self, "git_url": git, "html_url": html, "download_url": s.URL() + "/raw/" + r.FullName + "/" + ref + "/" + path,
		"_links": map[string]any{"git": git, "self": self, "html": html},
	}
	if typ == "dir" {
		out["size"], out["sha"], out["download_url"] = 0, "", nil
	}
	if withContent {
		out["encoding"] = "base64"
		out["content"] = base64.StdEncoding.EncodeToString([]byte(s.objects.blobs[blob]))
	}
	return out
}

// listPullFiles answers GET /repos/{owner}/{repo}/pulls/{n}/files
// (docs.github.com "List pull requests files"; fixture
// api-pulls-list-files.json): the files the pull request changes, from the
// merge base of its base and head to its head (for a merged one, of the
// base before the merge), sorted by filename, status added, removed,
// modified or renamed (a file removed and one added with the same content,
// with previous_filename), paged (30 by default, at most 100).
func (s *Server) listPullFiles(rc *reqCtx) {
	r, pr := s.pullOf(rc)
	if pr == nil {
		return
	}
	head := s.objects.commits[s.headOf(r, pr)]
	if head == nil {
		rc.json(http.StatusOK, []any{})
		return
	}
	baseTip := r.refs[pr.base]
	if m := s.objects.commits[pr.mergeSHA]; pr.merged && m != nil && len(m.parents) > 0 {
		baseTip = m.parents[0]
	}
	var before map[string]string
	if mb := s.objects.commits[s.mergeBase(baseTip, head.sha)]; mb != nil {
		before = s.objects.trees[mb.tree]
	}
	after := s.objects.trees[head.tree]
	type file struct{ name, previous, status, blob string }
	var files []file
	var added, removed []string
	for _, p := range slices.Sorted(maps.Keys(after)) {
		switch old, had := before[p]; {
		case !had:
			added = append(added, p)
		case old != after[p]:
			files = append(files, file{name: p, status: "modified", blob: after[p]})
		}
	}
	for _, p := range slices.Sorted(maps.Keys(before)) {
		if _, still := after[p]; !still {
			removed = append(removed, p)
		}
	}
	for _, p := range added {
		if i := slices.IndexFunc(removed, func(d string) bool { return before[d] == after[p] }); i >= 0 {
			files = append(files, file{name: p, previous: removed[i], status: "renamed", blob: after[p]})
			removed = slices.Delete(removed, i, i+1)
			continue
		}
		files = append(files, file{name: p, status: "added", blob: after[p]})
	}
	for _, p := range removed {
		files = append(files, file{name: p, status: "removed", blob: before[p]})
	}
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })
	items := make([]any, 0, len(files))
	for _, f := range files {
		oldLines, newLines := lineCount(s.objects.blobs[before[f.name]]), lineCount(s.objects.blobs[after[f.name]])
		switch f.status {
		case "added":
			oldLines = 0
		case "removed":
			newLines = 0
		case "renamed":
			oldLines, newLines = 0, 0
		}
		item := map[string]any{
			"sha": f.blob, "filename": f.name, "status": f.status,
			"additions": newLines, "deletions": oldLines, "changes": newLines + oldLines,
			"blob_url":     s.repoHTML(r) + "/blob/" + head.sha + "/" + f.name,
			"raw_url":      s.repoHTML(r) + "/raw/" + head.sha + "/" + f.name,
			"contents_url": s.repoAPI(r) + "/contents/" + f.name + "?ref=" + head.sha,
			"patch":        fmt.Sprintf("@@ -1,%d +1,%d @@", oldLines, newLines),
		}
		if f.previous != "" {
			item["previous_filename"] = f.previous
		}
		items = append(items, item)
	}
	rc.json(http.StatusOK, paginate(rc, items, 30))
}

// lineCount counts the lines of a text.
func lineCount(text string) int {
	if text == "" {
		return 0
	}
	return strings.Count(strings.TrimSuffix(text, "\n"), "\n") + 1
}
