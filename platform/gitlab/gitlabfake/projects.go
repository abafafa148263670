package gitlabfake

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// GitLab access levels (doc/api/members.md).
const (
	AccessGuest      = 10
	AccessReporter   = 20
	AccessDeveloper  = 30
	AccessMaintainer = 40
	AccessOwner      = 50
)

// ProjectSpec describes a project for AddProject. Zero fields take the
// defaults given.
type ProjectSpec struct {
	// PathWithNamespace, for example "group/repo". Required.
	PathWithNamespace string
	// DefaultBranch, default "main".
	DefaultBranch string
	// SquashOption is never, always, default_on or default_off (default).
	SquashOption string
	// MergeMethod is merge (default), rebase_merge or ff.
	MergeMethod string
	// Members maps username to access level (10, 20, 30, 40, 50). Users may
	// be added before or after the project.
	Members map[string]int
	// ProtectedBranches, default [DefaultBranch]. Pushing to them needs
	// Maintainer; pushes to them start a deploy ("push") pipeline.
	ProtectedBranches []string
	// ApprovalsRequired is how many approvals an MR needs before
	// detailed_merge_status leaves "not_approved" (default 0, as GitLab Free).
	ApprovalsRequired int
	// MergeAccessLevel is the access level needed to merge (default 30,
	// Developer; GitLab's default for a protected target is 40).
	MergeAccessLevel int
	// ResetApprovalsOnPush removes approvals when the MR head changes (the
	// Premium setting "Remove all approvals when commits are added").
	ResetApprovalsOnPush bool
	// Files are more files of the initial commit (path -> content), beside
	// README.md.
	Files map[string]string
	// MergeTrains turns merge trains on (the Premium setting
	// merge_trains_enabled, with merged results pipelines): merge requests
	// are merged by adding them to the train of their target branch
	// (POST /projects/:id/merge_trains/merge_requests/:iid; merge_trains.go).
	MergeTrains bool
}

// Project identifies a project created by AddProject.
type Project struct {
	ID                int64
	PathWithNamespace string
	DefaultBranch     string
	WebURL            string
}

// ChecklistItem is one entry of a project's approval checklist, the platform
// extension served at GET /api/v4/projects/:id/approval_checklist.
type ChecklistItem struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

type project struct {
	ProjectSpec
	id        int64
	repo      *repo
	mrs       map[int64]*mergeRequest // by iid
	nextIID   int64
	pipelines []*pipeline
	pipeIID   int64
	script    PipelineScript
	mrRuns    int
	deployRun int
	checklist []ChecklistItem
	mergeTime time.Duration          // SetMergeDuration
	labels    map[string]label       // by lower-case title (labelsHook)
	trains    map[string][]*trainCar // by target branch, first car first
	cars      map[int64]*trainCar    // by MR iid: every car, merged ones kept
}

// AddProject creates a project with its default branch holding one initial
// commit (README.md). It panics when PathWithNamespace is empty or taken:
// that is a bug in the test.
func (s *Server) AddProject(spec ProjectSpec) Project {
	s.mu.Lock()
	defer s.mu.Unlock()
	if spec.PathWithNamespace == "" || s.byPath[strings.ToLower(spec.PathWithNamespace)] != nil {
		panic("gitlabfake: AddProject: empty or duplicate PathWithNamespace " + strconv.Quote(spec.PathWithNamespace))
	}
	spec.DefaultBranch = cmpOr(spec.DefaultBranch, "main")
	spec.SquashOption = cmpOr(spec.SquashOption, "default_off")
	spec.MergeMethod = cmpOr(spec.MergeMethod, "merge")
	if spec.ProtectedBranches == nil {
		spec.ProtectedBranches = []string{spec.DefaultBranch}
	}
	if spec.MergeAccessLevel == 0 {
		spec.MergeAccessLevel = AccessDeveloper
	}
	members := map[string]int{}
	for k, v := range spec.Members {
		members[k] = v
	}
	spec.Members = members
	s.ids.project++
	p := &project{ProjectSpec: spec, id: s.ids.project, repo: newRepo(), mrs: map[int64]*mergeRequest{}}
	files := map[string]string{"README.md": "# " + spec.PathWithNamespace + "\n"}
	maps.Copy(files, spec.Files)
	c := s.newCommit(p, nil, "Initial commit", files, nil)
	p.repo.branches[spec.DefaultBranch] = c.id
	s.projects[p.id] = p
	s.byPath[strings.ToLower(spec.PathWithNamespace)] = p
	return Project{ID: p.id, PathWithNamespace: spec.PathWithNamespace, DefaultBranch: spec.DefaultBranch, WebURL: s.projectURL(p)}
}

// AddMember gives username (a user AddUser created) access to the project
// from now on, as a maintainer adding a member in GitLab would.
func (s *Server) AddMember(projectID int64, username string, access int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.projects[projectID]; p != nil {
		p.Members[username] = access
	}
}

// SetApprovalChecklist sets the checklist approvers must confirm (see
// approve). An empty list turns the check off.
func (s *Server) SetApprovalChecklist(projectID int64, items []ChecklistItem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.projects[projectID]; p != nil {
		p.checklist = slices.Clone(items)
	}
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (s *Server) projectURL(p *project) string { return s.baseURL() + "/" + p.PathWithNamespace }

func (p *project) name() string {
	i := strings.LastIndex(p.PathWithNamespace, "/")
	return p.PathWithNamespace[i+1:]
}

func (p *project) namespace() string {
	i := strings.LastIndex(p.PathWithNamespace, "/")
	if i < 0 {
		return p.PathWithNamespace
	}
	return p.PathWithNamespace[:i]
}

func (p *project) access(u *user) int {
	if u == nil {
		return 0
	}
	return p.Members[u.username]
}

func (p *project) protected(branch string) bool { return slices.Contains(p.ProtectedBranches, branch) }

// project resolves :id (numeric or URL-encoded path) or answers 404.
func (s *Server) project(rc *reqCtx) *project {
	id := rc.params["id"]
	var p *project
	if n, err := strconv.ParseInt(id, 10, 64); err == nil {
		p = s.projects[n]
	} else {
		p = s.byPath[strings.ToLower(id)]
	}
	if p == nil {
		rc.fail(http.StatusNotFound, "404 Project Not Found")
	}
	return p
}

// requireAccess answers 403 and reports false when the caller's role is
// below level.
func (rc *reqCtx) requireAccess(p *project, level int) bool {
	if p.access(rc.user) < level {
		rc.fail(http.StatusForbidden, "403 Forbidden")
		return false
	}
	return true
}

// getProject serves GET /projects/:id.
func (s *Server) getProject(rc *reqCtx) {
	p := s.project(rc)
	if p == nil {
		return
	}
	web := s.projectURL(p)
	rc.writeJSON(http.StatusOK, map[string]any{
		"id": p.id, "name": p.name(), "path": p.name(), "path_with_namespace": p.PathWithNamespace,
		"name_with_namespace": strings.ReplaceAll(p.PathWithNamespace, "/", " / "),
		"description":         "", "default_branch": p.DefaultBranch, "visibility": "internal",
		"web_url": web, "http_url_to_repo": web + ".git", "ssh_url_to_repo": "git@" + hostOf(s.baseURL()) + ":" + p.PathWithNamespace + ".git",
		"squash_option": p.SquashOption, "merge_method": p.MergeMethod,
		"merge_trains_enabled": p.MergeTrains, "merge_pipelines_enabled": p.MergeTrains,
		"only_allow_merge_if_pipeline_succeeds": true, "merge_requests_enabled": true,
		"namespace": map[string]any{"id": p.id, "name": p.namespace(), "path": p.namespace(), "kind": "group", "full_path": p.namespace()},
	})
}

// getMember serves GET /projects/:id/members/all/:user_id: 404 {"message":
// "404 Not found"} unless the user is a member.
func (s *Server) getMember(rc *reqCtx) {
	p := s.project(rc)
	if p == nil {
		return
	}
	id, _ := strconv.ParseInt(rc.params["user_id"], 10, 64)
	u := s.users[id]
	if u == nil || p.access(u) == 0 {
		rc.fail(http.StatusNotFound, "404 Not found")
		return
	}
	m := s.userBasic(u)
	m["access_level"] = p.access(u)
	m["created_at"] = restTime(u.created)
	m["expires_at"] = nil
	rc.writeJSON(http.StatusOK, m)
}

// getProtectedBranch serves GET /projects/:id/protected_branches/:name.
func (s *Server) getProtectedBranch(rc *reqCtx) {
	p := s.project(rc)
	if p == nil {
		return
	}
	name := rc.params["name"]
	i := slices.Index(p.ProtectedBranches, name)
	if i < 0 {
		rc.fail(http.StatusNotFound, "404 Not found")
		return
	}
	level := func(l int, d string) []any {
		return []any{map[string]any{"id": i + 1, "access_level": l, "access_level_description": d, "user_id": nil, "group_id": nil}}
	}
	merge, mergeDesc := p.MergeAccessLevel, "Maintainers"
	if merge < AccessMaintainer {
		mergeDesc = "Developers + Maintainers"
	}
	rc.writeJSON(http.StatusOK, map[string]any{
		"id": i + 1, "name": name,
		"push_access_levels":           level(AccessMaintainer, "Maintainers"),
		"merge_access_levels":          level(merge, mergeDesc),
		"allow_force_push":             false,
		"code_owner_approval_required": false,
	})
}

// getChecklist serves GET /projects/:id/approval_checklist (platform
// extension): {"items": [{"id", "text"}]}.
func (s *Server) getChecklist(rc *reqCtx) {
	p := s.project(rc)
	if p == nil {
		return
	}
	items := p.checklist
	if items == nil {
		items = []ChecklistItem{}
	}
	rc.writeJSON(http.StatusOK, map[string]any{"items": items})
}

func hostOf(base string) string {
	h := strings.TrimPrefix(strings.TrimPrefix(base, "http://"), "https://")
	if i := strings.IndexAny(h, ":/"); i >= 0 {
		h = h[:i]
	}
	return h
}
