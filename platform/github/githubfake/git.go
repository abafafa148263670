package githubfake

import (
	"crypto/sha1" // #nosec G505 -- git object ids, not security
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"
)

// RepoSpec describes a repository for AddRepo.
type RepoSpec struct {
	// FullName is "owner/name".
	FullName string
	// DefaultBranch defaults to "main".
	DefaultBranch string
	// Collaborators maps logins to their permission: read, triage, write,
	// maintain or admin.
	Collaborators map[string]string
	// DisallowMergeCommit, DisallowSquash and DisallowRebase switch off
	// merge methods (allow_merge_commit, allow_squash_merge,
	// allow_rebase_merge; all allowed by default, as on GitHub).
	DisallowMergeCommit, DisallowSquash, DisallowRebase bool
	// RequiredContexts are the default branch's required status checks
	// (check run names or status contexts).
	RequiredContexts []string
	// Strict requires the head to be up to date with the base to merge.
	Strict bool
	// RequiredApprovals is the default branch's required approving review
	// count (reviews by accounts with write permission).
	RequiredApprovals int
	// DismissStaleReviews counts only approvals of the current head.
	DismissStaleReviews bool
	// CI scripts the checks of every pushed head; nil means one GitHub
	// Actions job "build" that succeeds. NoCI: no checks at all.
	CI   *CIScript
	NoCI bool
	// Files are the initial commit's files; default one README.md.
	Files map[string]string
}

// Repo is a repository as tests see it.
type Repo struct {
	ID            int64
	FullName      string
	Owner, Name   string
	DefaultBranch string
}

type repo struct {
	Repo
	spec     RepoSpec
	created  time.Time
	refs     map[string]string // branch → commit sha
	pulls    map[int64]*pull
	number   int64
	comments map[int64]*comment
	runs     map[int64]*workflowRun
	checks   map[string][]*checkRun // sha → runs, oldest first
	statuses map[string][]*status   // sha → statuses, oldest first
	ci       CIScript
	ciCount  int
	// groupCount counts the merge group runs (CIScript.MergeGroups).
	groupCount int
	// mergeQueues are the branches that require a merge queue
	// (SetMergeQueue); queues their entries, first first; enqueued the
	// head shas of every accepted enqueuePullRequest, by pull request.
	mergeQueues map[string]bool
	queues      map[string][]*queueEntry
	enqueued    map[int64][]string
	// labels are the label ids by lower-case name (labelJSON).
	labels map[string]int64
}

// commit is a git commit.
type commit struct {
	seq     int64 // creation order
	sha     string
	tree    string
	parents []string
	message string
	author  string
	date    time.Time
}

// objectStore holds every repository's objects (GitHub's are per
// repository; shas make sharing harmless).
type objectStore struct {
	blobs   map[string]string
	trees   map[string]map[string]string // sha → path → blob sha (flat)
	commits map[string]*commit
}

func newObjectStore() objectStore {
	return objectStore{blobs: map[string]string{}, trees: map[string]map[string]string{}, commits: map[string]*commit{}}
}

func hashOf(parts ...string) string {
	h := sha1.New() // #nosec G401 -- git object ids
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (o *objectStore) putBlob(content string) string {
	sha := hashOf("blob", content)
	o.blobs[sha] = content
	return sha
}

func (o *objectStore) putTree(files map[string]string) string {
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := []string{"tree"}
	for _, k := range keys {
		parts = append(parts, k, files[k])
	}
	sha := hashOf(parts...)
	o.trees[sha] = files
	return sha
}

func (s *Server) putCommit(tree string, parents []string, message, author string) *commit {
	s.ids.commit++
	c := &commit{seq: s.ids.commit, tree: tree, parents: parents, message: message, author: author, date: s.now().UTC()}
	c.sha = hashOf(append([]string{"commit", tree, message, fmt.Sprint(s.ids.commit)}, parents...)...)
	s.objects.commits[c.sha] = c
	return c
}

// AddRepo adds a repository with one initial commit on its default branch.
func (s *Server) AddRepo(spec RepoSpec) Repo {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner, name, _ := strings.Cut(spec.FullName, "/")
	if spec.DefaultBranch == "" {
		spec.DefaultBranch = "main"
	}
	if spec.Files == nil {
		spec.Files = map[string]string{"README.md": "# " + name + "\n"}
	}
	s.ids.repo++
	r := &repo{
		Repo:     Repo{ID: s.ids.repo, FullName: spec.FullName, Owner: owner, Name: name, DefaultBranch: spec.DefaultBranch},
		spec:     spec,
		created:  s.now().UTC(),
		refs:     map[string]string{},
		pulls:    map[int64]*pull{},
		comments: map[int64]*comment{},
		runs:     map[int64]*workflowRun{},
		checks:   map[string][]*checkRun{},
		statuses: map[string][]*status{},
	}
	if spec.CI != nil {
		r.ci = *spec.CI
	}
	files := map[string]string{}
	for p, c := range spec.Files {
		files[p] = s.objects.putBlob(c)
	}
	c := s.putCommit(s.objects.putTree(files), nil, "Initial commit", owner)
	r.refs[spec.DefaultBranch] = c.sha
	s.repos[r.ID] = r
	s.byName[strings.ToLower(spec.FullName)] = r
	return r.Repo
}

// SetPermission sets login's permission on repository repoID ("" removes
// it).
func (s *Server) SetPermission(repoID int64, login, permission string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	if r.spec.Collaborators == nil {
		r.spec.Collaborators = map[string]string{}
	}
	if permission == "" {
		delete(r.spec.Collaborators, login)
		return
	}
	r.spec.Collaborators[login] = permission
}

// SetStrict turns branch protection's "Require branches to be up to date
// before merging" (strict required status checks) of repository repoID's
// default branch on or off, as an administrator editing the protection
// would: a pull request whose head lacks the base's tip then shows
// mergeable_state "behind" and its merge answers 405.
func (s *Server) SetStrict(repoID int64, strict bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repoID].spec.Strict = strict
}

// BranchSHA returns the tip of branch, "" when it does not exist.
func (s *Server) BranchSHA(repoID int64, branch string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.repos[repoID].refs[branch]
}

// FileAt returns the content of path at commit sha and whether it exists.
func (s *Server) FileAt(sha, path string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.objects.commits[sha]
	if c == nil {
		return "", false
	}
	b, ok := s.objects.trees[c.tree][path]
	return s.objects.blobs[b], ok
}

// PushToBranch commits one new file (and a line more in README.md) on branch as login (as a person's push
// would), moves the branch and reacts as GitHub does: pull requests of
// that head or base change, CI runs, webhooks go out. It returns the new
// tip.
func (s *Server) PushToBranch(repoID int64, branch, login string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	tip := r.refs[branch]
	files := map[string]string{}
	for k, v := range s.objects.trees[s.objects.commits[tip].tree] {
		files[k] = v
	}
	s.ids.commit++
	files[fmt.Sprintf("pushed/%d.txt", s.ids.commit)] = s.objects.putBlob(fmt.Sprintf("push %d\n", s.ids.commit))
	if b, ok := files["README.md"]; ok { // and a modified file, as pushes have
		files["README.md"] = s.objects.putBlob(s.objects.blobs[b] + fmt.Sprintf("push %d\n", s.ids.commit))
	}
	c := s.putCommit(s.objects.putTree(files), []string{tip}, "Push to "+branch, login)
	s.moveRef(r, branch, c.sha, s.byLogin[login])
	return c.sha
}

// moveRef moves branch to sha and lets everything that watches it react:
// pull requests (head or base), CI, push and synchronize webhooks.
func (s *Server) moveRef(r *repo, branch, sha string, by *user) {
	before := r.refs[branch]
	r.refs[branch] = sha
	if before == sha {
		return
	}
	s.emitPush(r, branch, before, sha, by)
	ci := branch == r.DefaultBranch
	for _, pr := range r.sortedPulls() {
		if pr.state != "open" {
			continue
		}
		if pr.head == branch || pr.base == branch {
			pr.mergeableKnown = false
		}
		if pr.head == branch {
			ci = true
			s.emitPull(r, pr, "synchronize", by, map[string]any{"before": before, "after": sha})
		}
	}
	if ci {
		s.startCI(r, sha, branch)
	}
}

// repoOf resolves {owner}/{repo}; it answers 404 and returns nil when
// missing.
func (s *Server) repoOf(rc *reqCtx) *repo {
	r := s.byName[strings.ToLower(rc.param("owner")+"/"+rc.param("repo"))]
	if r == nil {
		rc.fail(http.StatusNotFound, "Not Found")
	}
	return r
}

// permissionOf is login's permission on r ("" for none). An App's bot
// writes everywhere (an installation on all repositories).
func (r *repo) permissionOf(u *user) string {
	if u == nil {
		return ""
	}
	if u.Type == "Bot" {
		return "write"
	}
	if u.Login == r.Owner {
		return "admin"
	}
	return r.spec.Collaborators[u.Login]
}

var permissionRank = map[string]int{"read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}

// canWrite answers 403 and reports false unless the caller may write.
func (rc *reqCtx) canWrite(r *repo) bool {
	if permissionRank[r.permissionOf(rc.caller)] >= permissionRank["write"] {
		return true
	}
	rc.fail(http.StatusForbidden, "Resource not accessible by personal access token")
	return false
}

func (s *Server) getRepo(rc *reqCtx) {
	if r := s.repoOf(rc); r != nil {
		rc.json(http.StatusOK, s.repoJSON(r))
	}
}

func (s *Server) getRepoByID(rc *reqCtx) {
	r := s.repos[rc.intParam("id")]
	if r == nil {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	rc.json(http.StatusOK, s.repoJSON(r))
}

// getPermission answers GET .../collaborators/{login}/permission (fixture
// api-repos-collaborator-permission.json); a user without access gets
// "none", an unknown login 404.
func (s *Server) getPermission(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	u := s.byLogin[rc.param("login")]
	if u == nil {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	perm := r.permissionOf(u)
	legacy := perm
	switch perm {
	case "":
		perm, legacy = "none", "none"
	case "triage":
		legacy = "read"
	case "maintain":
		legacy = "write"
	}
	rc.json(http.StatusOK, map[string]any{"permission": legacy, "role_name": perm, "user": s.userJSON(u)})
}

// getBranch answers GET .../branches/{branch} with its protection
// (fixture api-repos-branch-with-protection.json).
func (s *Server) getBranch(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	name := rc.param("branch")
	sha, ok := r.refs[name]
	if !ok {
		rc.fail(http.StatusNotFound, "Branch not found")
		return
	}
	protected := name == r.DefaultBranch && (len(r.spec.RequiredContexts) > 0 || r.spec.RequiredApprovals > 0 || r.spec.Strict)
	api := s.repoAPI(r)
	out := map[string]any{
		"name":      name,
		"commit":    s.commitJSON(r, s.objects.commits[sha]),
		"_links":    map[string]any{"self": api + "/branches/" + name, "html": s.repoHTML(r) + "/tree/" + name},
		"protected": protected,
		"protection": map[string]any{
			"enabled": protected,
			"required_status_checks": map[string]any{
				"enforcement_level": map[bool]string{true: "non_admins", false: "off"}[protected],
				"contexts":          r.requiredFor(name),
			},
		},
		"protection_url": api + "/branches/" + name + "/protection",
	}
	rc.json(http.StatusOK, out)
}

// requiredFor lists the required contexts of branch.
func (r *repo) requiredFor(branch string) []string {
	if branch != r.DefaultBranch || r.spec.RequiredContexts == nil {
		return []string{}
	}
	return r.spec.RequiredContexts
}

// refJSON is a git ref (fixture api-git-ref.json).
func (s *Server) refJSON(r *repo, branch, sha string) map[string]any {
	return map[string]any{
		"ref":     "refs/heads/" + branch,
		"node_id": "REF_" + hashOf(r.FullName, branch)[:16],
		"url":     s.repoAPI(r) + "/git/refs/heads/" + branch,
		"object":  map[string]any{"type": "commit", "sha": sha, "url": s.repoAPI(r) + "/git/commits/" + sha},
	}
}

func branchOfRef(ref string) (string, bool) {
	return strings.CutPrefix(strings.TrimPrefix(ref, "refs/"), "heads/")
}

func (s *Server) getRef(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	b, ok := branchOfRef(rc.param("ref"))
	sha, found := r.refs[b]
	if !ok || !found {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	rc.json(http.StatusOK, s.refJSON(r, b, sha))
}

func (s *Server) createRef(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil || !rc.canWrite(r) {
		return
	}
	b, ok := branchOfRef(rc.str("ref"))
	sha := rc.str("sha")
	switch {
	case !ok || !strings.HasPrefix(rc.str("ref"), "refs/") || b == "":
		rc.fail(http.StatusUnprocessableEntity, "Reference name must start with 'refs/' and have at least two slashes.")
		return
	case s.objects.commits[sha] == nil:
		rc.fail(http.StatusUnprocessableEntity, "Object does not exist")
		return
	case r.refs[b] != "":
		rc.fail(http.StatusUnprocessableEntity, "Reference already exists")
		return
	}
	s.moveRef(r, b, sha, rc.caller)
	ref := s.refJSON(r, b, sha)
	rc.w.Header().Set("Location", ref["url"].(string)) // as GitHub's 201 (api-real-git-create-ref.exchange.json)
	rc.json(http.StatusCreated, ref)
}

// isAncestor reports whether a is b or an ancestor of b.
func (s *Server) isAncestor(a, b string) bool {
	seen := map[string]bool{}
	queue := []string{b}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		if x == a {
			return true
		}
		if seen[x] {
			continue
		}
		seen[x] = true
		if c := s.objects.commits[x]; c != nil {
			queue = append(queue, c.parents...)
		}
	}
	return false
}

func (s *Server) updateRef(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil || !rc.canWrite(r) {
		return
	}
	b, ok := branchOfRef(rc.param("ref"))
	old, found := r.refs[b]
	sha := rc.str("sha")
	switch {
	case !ok || !found:
		rc.fail(http.StatusUnprocessableEntity, "Reference does not exist")
		return
	case s.objects.commits[sha] == nil:
		rc.fail(http.StatusUnprocessableEntity, "Object does not exist")
		return
	case !rc.flag("force") && !s.isAncestor(old, sha):
		rc.fail(http.StatusUnprocessableEntity, "Update is not a fast forward")
		return
	}
	s.moveRef(r, b, sha, rc.caller)
	rc.json(http.StatusOK, s.refJSON(r, b, sha))
}

func (s *Server) deleteRef(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil || !rc.canWrite(r) {
		return
	}
	b, ok := branchOfRef(rc.param("ref"))
	if _, found := r.refs[b]; !ok || !found {
		rc.fail(http.StatusUnprocessableEntity, "Reference does not exist")
		return
	}
	delete(r.refs, b)
	rc.json(http.StatusNoContent, nil)
}

// createBlob answers POST .../git/blobs (fixture api-git-create-blob.json).
func (s *Server) createBlob(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil || !rc.canWrite(r) {
		return
	}
	if enc := rc.str("encoding"); enc != "" && enc != "utf-8" {
		rc.invalid("Blob", "encoding", "invalid", "encoding must be utf-8 in this fake")
		return
	}
	sha := s.objects.putBlob(rc.str("content"))
	rc.json(http.StatusCreated, map[string]any{"url": s.repoAPI(r) + "/git/blobs/" + sha, "sha": sha})
}

// createTree answers POST .../git/trees: entries on top of base_tree; an
// entry with sha null deletes the path (fixture api-git-create-tree.json).
func (s *Server) createTree(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil || !rc.canWrite(r) {
		return
	}
	files := map[string]string{}
	if base := rc.str("base_tree"); base != "" {
		bt, ok := s.objects.trees[base]
		if !ok {
			rc.fail(http.StatusUnprocessableEntity, "base_tree is not a valid tree oid")
			return
		}
		for k, v := range bt {
			files[k] = v
		}
	}
	entries, _ := rc.body["tree"].([]any)
	for _, e := range entries {
		m, _ := e.(map[string]any)
		p, _ := m["path"].(string)
		if p == "" {
			rc.invalid("Tree", "path", "missing_field", "")
			return
		}
		sha, hasSHA := m["sha"]
		content, hasContent := m["content"].(string)
		switch {
		case hasContent:
			files[p] = s.objects.putBlob(content)
		case hasSHA && sha == nil:
			delete(files, p)
			for k := range files { // deleting a directory deletes below it
				if strings.HasPrefix(k, p+"/") {
					delete(files, k)
				}
			}
		default:
			bs, _ := sha.(string)
			if _, ok := s.objects.blobs[bs]; !ok {
				rc.fail(http.StatusUnprocessableEntity, "tree.sha "+bs+" is not a valid blob")
				return
			}
			files[p] = bs
		}
	}
	sha := s.objects.putTree(files)
	rc.json(http.StatusCreated, s.treeJSON(r, sha, false))
}

// treeJSON lists a tree (fixture api-git-create-tree.json): with
// recursive every entry, directories included; else the top level.
func (s *Server) treeJSON(r *repo, sha string, recursive bool) map[string]any {
	files := s.objects.trees[sha]
	dirs := map[string]bool{}
	for p := range files {
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var names []string
	for p := range files {
		names = append(names, p)
	}
	for d := range dirs {
		names = append(names, d)
	}
	slices.Sort(names)
	entries := []any{}
	for _, p := range names {
		if !recursive && strings.Contains(p, "/") {
			continue
		}
		if dirs[p] {
			entries = append(entries, map[string]any{"path": p, "mode": "040000", "type": "tree", "sha": hashOf("dir", sha, p), "url": s.repoAPI(r) + "/git/trees/" + hashOf("dir", sha, p)})
			continue
		}
		b := files[p]
		entries = append(entries, map[string]any{"path": p, "mode": "100644", "type": "blob", "size": len(s.objects.blobs[b]), "sha": b, "url": s.repoAPI(r) + "/git/blobs/" + b})
	}
	return map[string]any{"sha": sha, "url": s.repoAPI(r) + "/git/trees/" + sha, "tree": entries, "truncated": false}
}

// resolve turns a sha or branch name into a commit.
func (s *Server) resolve(r *repo, ref string) *commit {
	if c := s.objects.commits[ref]; c != nil {
		return c
	}
	if b, ok := branchOfRef(ref); ok {
		ref = b
	}
	if sha, ok := r.refs[ref]; ok {
		return s.objects.commits[sha]
	}
	return nil
}

func (s *Server) getTree(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	ref := rc.param("ref")
	sha := ref
	if _, ok := s.objects.trees[ref]; !ok {
		c := s.resolve(r, ref)
		if c == nil {
			rc.fail(http.StatusNotFound, "Not Found")
			return
		}
		sha = c.tree
	}
	rc.json(http.StatusOK, s.treeJSON(r, sha, rc.query("recursive") != ""))
}

// createCommit answers POST .../git/commits (fixture
// api-git-create-commit.json).
func (s *Server) createCommit(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil || !rc.canWrite(r) {
		return
	}
	tree := rc.str("tree")
	if _, ok := s.objects.trees[tree]; !ok {
		rc.fail(http.StatusUnprocessableEntity, "Tree SHA does not exist")
		return
	}
	var parents []string
	ps, _ := rc.body["parents"].([]any)
	for _, p := range ps {
		sha, _ := p.(string)
		if s.objects.commits[sha] == nil {
			rc.fail(http.StatusUnprocessableEntity, "Parent SHA does not exist or is not a commit object")
			return
		}
		parents = append(parents, sha)
	}
	c := s.putCommit(tree, parents, rc.str("message"), rc.caller.Login)
	rc.json(http.StatusCreated, s.gitCommitJSON(r, c))
}

func (s *Server) getGitCommit(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	c := s.objects.commits[rc.param("sha")]
	if c == nil {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	rc.json(http.StatusOK, s.gitCommitJSON(r, c))
}

func (s *Server) getCommit(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	c := s.resolve(r, rc.param("ref"))
	if c == nil {
		rc.fail(http.StatusUnprocessableEntity, "No commit found for SHA: "+rc.param("ref"))
		return
	}
	rc.json(http.StatusOK, s.commitJSON(r, c))
}

// history lists the commits reachable from sha, newest first (first
// parents before second ones, each once).
func (s *Server) history(sha string, limit int) []*commit {
	var out []*commit
	seen := map[string]bool{}
	queue := []string{sha}
	for len(queue) > 0 && len(out) < limit {
		x := queue[0]
		queue = queue[1:]
		c := s.objects.commits[x]
		if c == nil || seen[x] {
			continue
		}
		seen[x] = true
		out = append(out, c)
		queue = append(queue, c.parents...)
	}
	return out
}

func (s *Server) listCommits(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	ref := rc.query("sha")
	if ref == "" {
		ref = r.DefaultBranch
	}
	c := s.resolve(r, ref)
	if c == nil {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	per := perPage(rc, 30)
	out := []any{}
	for _, h := range s.history(c.sha, per) {
		out = append(out, s.commitJSON(r, h))
	}
	rc.json(http.StatusOK, out)
}

// mergeBase is the newest common ancestor of a and b ("" for none).
func (s *Server) mergeBase(a, b string) string {
	anc := map[string]bool{}
	for _, c := range s.history(a, 1<<20) {
		anc[c.sha] = true
	}
	var best *commit
	for _, c := range s.history(b, 1<<20) {
		if anc[c.sha] && (best == nil || c.seq > best.seq) {
			best = c
		}
	}
	if best == nil {
		return ""
	}
	return best.sha
}

// compare answers GET .../compare/{base}...{head}: status ahead, behind,
// identical or diverged, and the head's commits since the merge base,
// oldest first.
func (s *Server) compare(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	baseRef, headRef, ok := strings.Cut(rc.param("spec"), "...")
	base, head := s.resolve(r, baseRef), s.resolve(r, headRef)
	if !ok || base == nil || head == nil {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	mb := s.mergeBase(base.sha, head.sha)
	var commits []*commit
	for _, c := range s.history(head.sha, 1<<20) {
		if !s.isAncestor(c.sha, mb) {
			commits = append(commits, c)
		}
	}
	behind := 0
	for _, c := range s.history(base.sha, 1<<20) {
		if !s.isAncestor(c.sha, mb) {
			behind++
		}
	}
	slices.Reverse(commits)
	status := "diverged"
	switch {
	case base.sha == head.sha:
		status = "identical"
	case mb == base.sha:
		status = "ahead"
	case mb == head.sha:
		status = "behind"
	}
	list := []any{}
	for _, c := range commits {
		list = append(list, s.commitJSON(r, c))
	}
	out := map[string]any{
		"url": s.repoAPI(r) + "/compare/" + rc.param("spec"), "status": status,
		"ahead_by": len(commits), "behind_by": behind, "total_commits": len(commits),
		"base_commit": s.commitJSON(r, base), "commits": list, "files": []any{},
	}
	if c := s.objects.commits[mb]; c != nil {
		out["merge_base_commit"] = s.commitJSON(r, c)
	}
	rc.json(http.StatusOK, out)
}

// perPage reads per_page, default def, at most 100 (docs.github.com "Using
// pagination in the REST API": "per_page ... max 100").
func perPage(rc *reqCtx, def int) int {
	n := def
	if v := rc.query("per_page"); v != "" {
		_, _ = fmt.Sscan(v, &n)
	}
	return min(max(n, 1), 100)
}

// page reads page (1-based).
func page(rc *reqCtx) int {
	n := 1
	if v := rc.query("page"); v != "" {
		_, _ = fmt.Sscan(v, &n)
	}
	return max(n, 1)
}

// paginate answers one page of items with GitHub's Link header: rel
// "prev", "next", "last" and "first" as they apply, in GitHub's order
// (docs.github.com "Using pagination in the REST API", the link header).
// An answer that fits one page has none.
func paginate[T any](rc *reqCtx, items []T, def int) []T {
	per, p := perPage(rc, def), page(rc)
	start := min((p-1)*per, len(items))
	end := min(start+per, len(items))
	last := max((len(items)+per-1)/per, 1)
	link := func(n int, rel string) string {
		u := *rc.r.URL
		q := u.Query()
		q.Set("page", fmt.Sprint(n))
		q.Set("per_page", fmt.Sprint(per))
		u.RawQuery = q.Encode()
		return fmt.Sprintf(`<%s%s>; rel=%q`, rc.s.URL(), u.RequestURI(), rel)
	}
	var links []string
	if p > 1 {
		links = append(links, link(min(p-1, last), "prev"))
	}
	if p < last {
		links = append(links, link(p+1, "next"), link(last, "last"))
	}
	if p > 1 {
		links = append(links, link(1, "first"))
	}
	if len(links) > 0 {
		rc.w.Header().Set("Link", strings.Join(links, ", "))
	}
	return items[start:end]
}

// PushFiles pushes one commit by login on branch setting files (path ->
// content), as a person pushing by hand, and returns its sha ("" when the
// repository, the branch or the user does not exist). Pull requests from or
// into branch react as to any push (moveRef).
func (s *Server) PushFiles(repoID int64, branch, login, message string, files map[string]string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	if r == nil || r.refs[branch] == "" || s.byLogin[login] == nil {
		return ""
	}
	tip := r.refs[branch]
	tree := maps.Clone(s.objects.trees[s.objects.commits[tip].tree])
	for path, content := range files {
		tree[path] = s.objects.putBlob(content)
	}
	c := s.putCommit(s.objects.putTree(tree), []string{tip}, message, login)
	s.moveRef(r, branch, c.sha, s.byLogin[login])
	return c.sha
}
