package gitlabfake

import (
	"cmp"
	"container/heap"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// repo is a project's repository: commits with full file trees (small in a
// fake) and branch heads.
type repo struct {
	branches map[string]string // name -> sha
	commits  map[string]*commit
}

type commit struct {
	id, message string
	parents     []string
	files       map[string]string
	author      *user // nil: the fake's system author
	at          time.Time
	adds, dels  int
	seq         int64 // creation order
}

func newRepo() *repo { return &repo{branches: map[string]string{}, commits: map[string]*commit{}} }

func (c *commit) title() string { t, _, _ := strings.Cut(c.message, "\n"); return t }

// newCommit stores a commit with the given parents and tree; its sha is
// unique per server.
func (s *Server) newCommit(p *project, parents []string, msg string, files map[string]string, author *user) *commit {
	s.ids.commit++
	h := sha1.Sum(fmt.Appendf(nil, "%d\x00%s\x00%v\x00%s", s.ids.commit, p.PathWithNamespace, parents, msg))
	c := &commit{id: hex.EncodeToString(h[:]), message: msg, parents: parents, files: files, author: author, at: s.now(), seq: s.ids.commit}
	if len(parents) > 0 {
		c.adds, c.dels = diffStats(p.repo.commits[parents[0]].files, files)
	} else {
		c.adds, _ = diffStats(nil, files)
	}
	p.repo.commits[c.id] = c
	return c
}

func diffStats(old, cur map[string]string) (adds, dels int) {
	lines := func(s string) int { return strings.Count(s, "\n") + 1 }
	for k, v := range cur {
		if o, ok := old[k]; !ok {
			adds += lines(v)
		} else if o != v {
			adds += lines(v)
			dels += lines(o)
		}
	}
	for k, o := range old {
		if _, ok := cur[k]; !ok {
			dels += lines(o)
		}
	}
	return adds, dels
}

// ancestors returns sha and every commit reachable from it.
func (r *repo) ancestors(sha string) map[string]bool {
	seen := map[string]bool{}
	stack := []string{sha}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if c == "" || seen[c] {
			continue
		}
		seen[c] = true
		if cm := r.commits[c]; cm != nil {
			stack = append(stack, cm.parents...)
		}
	}
	return seen
}

// isAncestor reports whether a is b or one of its ancestors. It walks b's
// history and stops below a's creation order (parents are always older),
// so that it costs the commits between the two, not the whole history
// (the chaos run's thousands of merges made every call walk all of it).
func (r *repo) isAncestor(a, b string) bool {
	ca := r.commits[a]
	if ca == nil {
		return false
	}
	seen := map[string]bool{}
	stack := []string{b}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if c == a {
			return true
		}
		cm := r.commits[c]
		if cm == nil || seen[c] || cm.seq <= ca.seq {
			continue
		}
		seen[c] = true
		stack = append(stack, cm.parents...)
	}
	return false
}

// mergeBase returns the newest common ancestor of a and b (by creation
// order, which is enough for the fake's simple histories), "" when none.
// It walks both histories newest first and stops at the first commit
// reached from both: parents are older than their children, so a commit's
// marks are complete when it is taken.
func (r *repo) mergeBase(a, b string) string {
	const fromA, fromB = 1, 2
	marks := map[string]int{}
	h := &commitHeap{}
	push := func(sha string, m int) {
		if r.commits[sha] == nil {
			return
		}
		if _, queued := marks[sha]; !queued {
			heap.Push(h, r.commits[sha])
		}
		marks[sha] |= m
	}
	push(a, fromA)
	push(b, fromB)
	for h.Len() > 0 {
		c := heap.Pop(h).(*commit)
		m := marks[c.id]
		if m == fromA|fromB {
			return c.id
		}
		for _, parent := range c.parents {
			push(parent, m)
		}
	}
	return ""
}

// commitHeap is a max-heap of commits by creation order.
type commitHeap []*commit

func (h commitHeap) Len() int           { return len(h) }
func (h commitHeap) Less(i, j int) bool { return h[i].seq > h[j].seq }
func (h commitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *commitHeap) Push(x any)        { *h = append(*h, x.(*commit)) }
func (h *commitHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// threeWay applies the changes between base and head onto onto (the fake
// never reports content conflicts: RebaseBehavior.Conflict scripts them).
func (r *repo) threeWay(base, head, onto string) map[string]string {
	b, h := r.commits[base].files, r.commits[head].files
	out := maps.Clone(r.commits[onto].files)
	for k, v := range h {
		if bv, ok := b[k]; !ok || bv != v {
			out[k] = v
		}
	}
	for k := range b {
		if _, ok := h[k]; !ok {
			delete(out, k)
		}
	}
	return out
}

// commitJSON is API::Entities::Commit (branch commit), with stats
// API::Entities::CommitDetail (commit create, fixture api-commit-create.json).
func (s *Server) commitJSON(p *project, c *commit, stats bool) map[string]any {
	name, email := "GitLab", "gitlab@example.com"
	if c.author != nil {
		name, email = c.author.name, c.author.username+"@example.com"
	}
	m := map[string]any{
		"id": c.id, "short_id": c.id[:11], "title": c.title(), "message": c.message,
		"author_name": name, "author_email": email, "committer_name": name, "committer_email": email,
		"created_at": restTime(c.at), "authored_date": restTime(c.at), "committed_date": restTime(c.at),
		"parent_ids": append([]string{}, c.parents...), "trailers": map[string]any{}, "extended_trailers": map[string]any{},
		"web_url": s.projectURL(p) + "/-/commit/" + c.id,
	}
	if stats {
		m["stats"] = map[string]any{"additions": c.adds, "deletions": c.dels, "total": c.adds + c.dels}
		m["status"] = nil
		m["project_id"] = p.id
		m["last_pipeline"] = nil
	}
	return m
}

// branchJSON is API::Entities::Branch (fixture api-branch-create.json).
func (s *Server) branchJSON(p *project, name string, u *user) map[string]any {
	c := p.repo.commits[p.repo.branches[name]]
	prot := p.protected(name)
	return map[string]any{
		"name": name, "merged": false, "protected": prot, "default": name == p.DefaultBranch,
		"developers_can_push": false, "developers_can_merge": prot && p.MergeAccessLevel <= AccessDeveloper,
		"can_push": p.access(u) >= pushLevel(p, name), "web_url": s.projectURL(p) + "/-/tree/" + name,
		"commit": s.commitJSON(p, c, false),
	}
}

func pushLevel(p *project, branch string) int {
	if p.protected(branch) {
		return AccessMaintainer
	}
	return AccessDeveloper
}

// getBranch serves GET /projects/:id/repository/branches/:branch.
func (s *Server) getBranch(rc *reqCtx) {
	p := s.project(rc)
	if p == nil {
		return
	}
	name := rc.params["branch"]
	if _, ok := p.repo.branches[name]; !ok {
		rc.fail(http.StatusNotFound, "404 Branch Not Found")
		return
	}
	rc.writeJSON(http.StatusOK, s.branchJSON(p, name, rc.user))
}

// createBranch serves POST /projects/:id/repository/branches (branch, ref):
// 201 with the branch, 400 "Branch already exists", 400 "Invalid reference
// name: <ref>" for an unknown ref.
func (s *Server) createBranch(rc *reqCtx) {
	p := s.project(rc)
	if p == nil || !rc.requireAccess(p, AccessDeveloper) {
		return
	}
	name, ok := rc.str("branch")
	if !ok || name == "" {
		rc.missing("branch")
		return
	}
	ref, ok := rc.str("ref")
	if !ok || ref == "" {
		rc.missing("ref")
		return
	}
	if _, exists := p.repo.branches[name]; exists {
		rc.fail(http.StatusBadRequest, "Branch already exists")
		return
	}
	sha := p.repo.resolve(ref)
	if sha == "" {
		rc.fail(http.StatusBadRequest, "Invalid reference name: "+ref)
		return
	}
	p.repo.branches[name] = sha
	rc.writeJSON(http.StatusCreated, s.branchJSON(p, name, rc.user))
}

// deleteBranch serves DELETE /projects/:id/repository/branches/:branch
// (doc/api/branches.md "Delete repository branch"): 204, 404 "404 Branch Not
// Found", 403 for a protected or the default branch.
func (s *Server) deleteBranch(rc *reqCtx) {
	p := s.project(rc)
	if p == nil || !rc.requireAccess(p, AccessDeveloper) {
		return
	}
	name := rc.params["branch"]
	if _, ok := p.repo.branches[name]; !ok {
		rc.fail(http.StatusNotFound, "404 Branch Not Found")
		return
	}
	if name == p.DefaultBranch || p.protected(name) {
		rc.fail(http.StatusForbidden, "403 Forbidden")
		return
	}
	delete(p.repo.branches, name)
	rc.status = http.StatusNoContent
	rc.w.WriteHeader(http.StatusNoContent)
}

// HasBranch reports whether project projectID has branch name.
func (s *Server) HasBranch(projectID int64, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projects[projectID]
	if p == nil {
		return false
	}
	_, ok := p.repo.branches[name]
	return ok
}

// resolve turns a branch name or a (full) sha into a sha, "" if unknown.
func (r *repo) resolve(ref string) string {
	if sha, ok := r.branches[ref]; ok {
		return sha
	}
	if _, ok := r.commits[ref]; ok {
		return ref
	}
	return ""
}

// fileAction is one entry of actions[] (fixture api-commit-create-request.json).
type fileAction struct {
	Action       string `json:"action"`
	FilePath     string `json:"file_path"`
	PreviousPath string `json:"previous_path"`
	Content      string `json:"content"`
}

// createCommit serves POST /projects/:id/repository/commits (branch,
// commit_message, actions[], start_branch, start_sha, force): 201 with the
// commit (fixture api-commit-create.json); 400 with the Files::MultiService
// message on a bad action; 403 "You are not allowed to push into this
// branch"; 400 "A branch called '<b>' already exists. Switch to that branch
// in order to make changes" when a start_branch other than branch, or a
// start_sha, is given for a branch that exists without force
// (Commits::CreateService#validate_branch_existence!, different_branch?).
func (s *Server) createCommit(rc *reqCtx) {
	p := s.project(rc)
	if p == nil || !rc.requireAccess(p, AccessDeveloper) {
		return
	}
	var req struct {
		Branch        string       `json:"branch"`
		CommitMessage string       `json:"commit_message"`
		StartBranch   string       `json:"start_branch"`
		StartSHA      string       `json:"start_sha"`
		Force         bool         `json:"force"`
		Actions       []fileAction `json:"actions"`
	}
	if err := json.Unmarshal(rc.body, &req); err != nil {
		rc.writeJSON(http.StatusBadRequest, map[string]any{"error": "actions is missing"})
		return
	}
	switch {
	case req.Branch == "":
		rc.missing("branch")
		return
	case req.CommitMessage == "":
		rc.missing("commit_message")
		return
	case len(req.Actions) == 0:
		rc.missing("actions")
		return
	}
	if p.access(rc.user) < pushLevel(p, req.Branch) {
		rc.fail(http.StatusForbidden, "403 Forbidden - You are not allowed to push into this branch")
		return
	}
	parent, exists := p.repo.branches[req.Branch]
	different := req.StartSHA != "" || (req.StartBranch != "" && req.StartBranch != req.Branch)
	if exists && different && !req.Force {
		rc.fail(http.StatusBadRequest, fmt.Sprintf("A branch called '%s' already exists. Switch to that branch in order to make changes", req.Branch))
		return
	}
	if !exists || different { // force: the branch starts again at the start
		start := cmpOr(req.StartSHA, req.StartBranch)
		if parent = p.repo.resolve(start); start == "" || parent == "" {
			rc.fail(http.StatusBadRequest, "You can only create or edit files when you are on a branch")
			return
		}
	}
	files := maps.Clone(p.repo.commits[parent].files)
	if msg := applyActions(files, req.Actions); msg != "" {
		rc.fail(http.StatusBadRequest, msg)
		return
	}
	c := s.newCommit(p, []string{parent}, req.CommitMessage, files, rc.user)
	s.moveBranch(p, req.Branch, c.id, rc.user)
	rc.writeJSON(http.StatusCreated, s.commitJSON(p, c, true))
}

// applyActions edits files in place and returns GitLab's error message for
// the first invalid action, "" when all applied.
func applyActions(files map[string]string, actions []fileAction) string {
	for _, a := range actions {
		_, has := files[a.FilePath]
		switch a.Action {
		case "create":
			if has {
				return "A file with this name already exists"
			}
			files[a.FilePath] = a.Content
		case "update":
			if !has {
				return "A file with this name doesn't exist"
			}
			files[a.FilePath] = a.Content
		case "delete":
			if !has {
				return "A file with this name doesn't exist"
			}
			delete(files, a.FilePath)
		case "move":
			old, ok := files[a.PreviousPath]
			if !ok {
				return "A file with this name doesn't exist"
			}
			if has {
				return "A file with this name already exists"
			}
			delete(files, a.PreviousPath)
			if a.Content != "" {
				old = a.Content
			}
			files[a.FilePath] = old
		case "chmod":
			if !has {
				return "A file with this name doesn't exist"
			}
		default:
			return "Unknown action '" + a.Action + "'"
		}
	}
	return ""
}

// moveBranch points branch at sha and runs what a push triggers: MRs from
// the branch get the new head (pipeline, "update" hook with oldrev); a push
// to a protected branch starts a deploy ("push") pipeline.
func (s *Server) moveBranch(p *project, branch, sha string, by *user) {
	before := p.repo.branches[branch]
	p.repo.branches[branch] = sha
	for _, mr := range p.sortedMRs() {
		if mr.state == stateOpened && mr.sourceBranch == branch && mr.sha != sha {
			s.setMRHead(p, mr, sha, by)
		}
	}
	if p.protected(branch) {
		s.startPipeline(p, pipelineSpec{sha: sha, before: before, ref: branch, source: "push", user: by})
	}
}

// PushToTarget simulates someone else's commit on branch (a file
// "other-<n>.txt" is added by user "someone-else"). Open MRs into it now show
// detailed_merge_status "need_rebase" when the merge method is ff or
// rebase_merge; with "merge" they stay mergeable. Like any push to a
// protected branch it starts a deploy ("push") pipeline, which takes the
// next PipelineScript.Deploy outcome.
func (s *Server) PushToTarget(projectID int64, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projects[projectID]
	if p == nil {
		return
	}
	head, ok := p.repo.branches[branch]
	if !ok {
		return
	}
	other := s.userByName("someone-else")
	files := maps.Clone(p.repo.commits[head].files)
	files[fmt.Sprintf("other-%d.txt", s.ids.commit+1)] = "someone else's change\n"
	c := s.newCommit(p, []string{head}, "Someone else's change", files, other)
	s.moveBranch(p, branch, c.id, other)
}

// Push simulates username pushing one commit with message to branch that
// sets files (path -> content; an empty content deletes the file), as a
// developer fixing a change's branch by hand. Open MRs from branch move to
// the new head. It returns the new commit's sha, "" when the project or
// branch does not exist.
func (s *Server) Push(projectID int64, branch, username, message string, files map[string]string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projects[projectID]
	if p == nil {
		return ""
	}
	head, ok := p.repo.branches[branch]
	if !ok {
		return ""
	}
	by := s.userByName(username)
	tree := maps.Clone(p.repo.commits[head].files)
	for path, content := range files {
		if content == "" {
			delete(tree, path)
			continue
		}
		tree[path] = content
	}
	c := s.newCommit(p, []string{head}, message, tree, by)
	s.moveBranch(p, branch, c.id, by)
	return c.id
}

// getCommit serves GET /projects/:id/repository/commits/:sha (sha or branch).
func (s *Server) getCommit(rc *reqCtx) {
	p := s.project(rc)
	if p == nil {
		return
	}
	sha := p.repo.resolve(rc.params["sha"])
	if sha == "" {
		rc.fail(http.StatusNotFound, "404 Commit Not Found")
		return
	}
	rc.writeJSON(http.StatusOK, s.commitJSON(p, p.repo.commits[sha], true))
}

// getRawFile serves GET /projects/:id/repository/files/:file_path/raw?ref=.
func (s *Server) getRawFile(rc *reqCtx) {
	p := s.project(rc)
	if p == nil {
		return
	}
	sha := p.repo.resolve(cmpOr(rc.get("ref"), p.DefaultBranch))
	if sha == "" {
		rc.fail(http.StatusNotFound, "404 Commit Not Found")
		return
	}
	content, ok := p.repo.commits[sha].files[rc.params["file_path"]]
	if !ok {
		rc.fail(http.StatusNotFound, "404 File Not Found")
		return
	}
	rc.status = http.StatusOK
	rc.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rc.w.WriteHeader(http.StatusOK)
	_, _ = rc.w.Write([]byte(content))
}

// listTree serves GET /projects/:id/repository/tree?path=&ref=&recursive=
// (doc/api/repositories.md "List repository tree"): the entries under path
// at ref (default branch when empty), directories ("tree", mode 040000)
// and files ("blob", mode 100644), sorted by path, only the direct children
// unless recursive=true; offset pagination (a keyset request is answered
// the same way). 404 "Tree Not Found" for a path with no entries, 404 "Ref
// Not Found" for an unknown ref.
func (s *Server) listTree(rc *reqCtx) {
	p := s.project(rc)
	if p == nil {
		return
	}
	sha := p.repo.resolve(cmpOr(rc.get("ref"), p.DefaultBranch))
	if sha == "" {
		rc.fail(http.StatusNotFound, "404 Ref Not Found")
		return
	}
	dir := strings.Trim(rc.get("path"), "/")
	recursive, _ := rc.boolean("recursive")
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	entries := map[string]string{} // path -> type
	for path := range p.repo.commits[sha].files {
		rest, ok := strings.CutPrefix(path, prefix)
		if !ok {
			continue
		}
		parts := strings.Split(rest, "/")
		for i := range parts {
			typ := "tree"
			if i == len(parts)-1 {
				typ = "blob"
			}
			entries[prefix+strings.Join(parts[:i+1], "/")] = typ
			if !recursive {
				break
			}
		}
	}
	if len(entries) == 0 && dir != "" {
		rc.fail(http.StatusNotFound, "404 Tree Not Found")
		return
	}
	items := make([]any, 0, len(entries))
	for _, path := range slices.Sorted(maps.Keys(entries)) {
		typ, mode := entries[path], "100644"
		if typ == "tree" {
			mode = "040000"
		}
		h := sha1.Sum([]byte(typ + "\x00" + path + "\x00" + p.repo.commits[sha].files[path]))
		name := path[strings.LastIndex(path, "/")+1:]
		items = append(items, map[string]any{"id": hex.EncodeToString(h[:]), "name": name, "type": typ, "path": path, "mode": mode})
	}
	rc.paginate(items)
}

// compare serves GET /projects/:id/repository/compare?from=&to= minimally:
// commit (to), commits (from..to, oldest first), diffs (paths added or
// changed since the merge base; deletions are not listed), compare_same_ref.
func (s *Server) compare(rc *reqCtx) {
	p := s.project(rc)
	if p == nil {
		return
	}
	from, to := p.repo.resolve(rc.get("from")), p.repo.resolve(rc.get("to"))
	if from == "" || to == "" {
		rc.fail(http.StatusNotFound, "404 Ref Not Found")
		return
	}
	reach := p.repo.ancestors(from)
	var between []*commit
	for id := range p.repo.ancestors(to) {
		if !reach[id] {
			between = append(between, p.repo.commits[id])
		}
	}
	slices.SortFunc(between, func(a, b *commit) int { return cmp.Compare(a.seq, b.seq) })
	commits := []any{}
	for _, c := range between {
		commits = append(commits, s.commitJSON(p, c, false))
	}
	diffs := []any{}
	// Like GitLab's default (straight=false): diff from the merge base.
	a, b := p.repo.commits[p.repo.mergeBase(from, to)].files, p.repo.commits[to].files
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if av, ok := a[k]; !ok || av != b[k] {
			diffs = append(diffs, map[string]any{"old_path": k, "new_path": k, "new_file": !ok, "deleted_file": false, "renamed_file": false})
		}
	}
	rc.writeJSON(http.StatusOK, map[string]any{
		"commit": s.commitJSON(p, p.repo.commits[to], false), "commits": commits, "diffs": diffs,
		"compare_timeout": false, "compare_same_ref": from == to, "web_url": s.projectURL(p) + "/-/compare/" + from + "..." + to,
	})
}

// mergeBase serves GET /projects/:id/repository/merge_base?refs[]=a&refs[]=b.
func (s *Server) mergeBase(rc *reqCtx) {
	p := s.project(rc)
	if p == nil {
		return
	}
	refs := rc.r.URL.Query()["refs[]"]
	if len(refs) != 2 {
		rc.fail(http.StatusBadRequest, "Provide exactly two refs")
		return
	}
	a, b := p.repo.resolve(refs[0]), p.repo.resolve(refs[1])
	if a == "" || b == "" {
		rc.fail(http.StatusNotFound, "Could not find ref")
		return
	}
	rc.writeJSON(http.StatusOK, s.commitJSON(p, p.repo.commits[p.repo.mergeBase(a, b)], false))
}
