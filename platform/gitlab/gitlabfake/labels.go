package gitlabfake

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// DeveloperMR describes a merge request a person opens by hand
// (Server.OpenMRAsUser): a branch from TargetBranch with Files committed
// by Username, then the merge request with Labels.
type DeveloperMR struct {
	ProjectID                  int64
	Username                   string
	SourceBranch, TargetBranch string
	Title                      string
	// Files are path -> content committed on the new branch.
	Files map[string]string
	// Labels are the titles set at creation (POST .../merge_requests
	// labels, doc/api/merge_requests.md).
	Labels []string
}

// OpenMRAsUser makes d.Username (created on first use) push branch
// d.SourceBranch and open a merge request from it as a developer would:
// the push, the merge request pipeline and the Merge Request Hook "open"
// carrying the labels (fixture webhook-merge_request-open.json). It returns
// the iid, 0 when the project or the target branch does not exist.
func (s *Server) OpenMRAsUser(d DeveloperMR) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projects[d.ProjectID]
	if p == nil {
		return 0
	}
	base, ok := p.repo.branches[d.TargetBranch]
	if !ok {
		return 0
	}
	by := s.userByName(d.Username)
	tree := maps.Clone(p.repo.commits[base].files)
	maps.Copy(tree, d.Files)
	c := s.newCommit(p, []string{base}, d.Title, tree, by)
	s.moveBranch(p, d.SourceBranch, c.id, by)
	s.ids.mr++
	p.nextIID++
	now := s.now()
	mr := &mergeRequest{
		id: s.ids.mr, iid: p.nextIID, p: p, title: d.Title, state: stateOpened,
		sourceBranch: d.SourceBranch, targetBranch: d.TargetBranch, author: by,
		sha: c.id, startSHA: base, created: now, updated: now, labels: slices.Clone(d.Labels),
	}
	p.mrs[mr.iid] = mr
	s.mrByID[mr.id] = mr
	s.startMRPipeline(mr, by)
	changes := map[string]any{"merge_status": change("preparing", mergeChecking), "updated_at": change(hookTime(now), hookTime(now))}
	if len(mr.labels) > 0 {
		changes["labels"] = change([]any{}, s.labelsHook(p, mr.labels))
	}
	s.emitMRHook(mr, by, "open", hookExtra{computing: mergeChecking, changes: changes})
	return mr.iid
}

// SetLabelsAsUser makes username add and remove labels on MR !iid as
// PUT .../merge_requests/:iid with add_labels and remove_labels does
// (doc/api/merge_requests.md): when the set changes, a Merge Request Hook
// "update" with changes.labels {"previous", "current"} (GitLab's
// webhook_events.md, Merge request events).
func (s *Server) SetLabelsAsUser(projectID, iid int64, username string, add, remove []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projects[projectID]
	if p == nil || p.mrs[iid] == nil {
		return
	}
	s.changeLabels(p.mrs[iid], s.userByName(username), add, remove)
}

// changeLabels adds then removes label titles on mr (case-insensitive, as
// GitLab matches label names) and emits the update hook when they changed.
func (s *Server) changeLabels(mr *mergeRequest, by *user, add, remove []string) {
	before := slices.Clone(mr.labels)
	for _, l := range add {
		if !slices.ContainsFunc(mr.labels, func(x string) bool { return strings.EqualFold(x, l) }) {
			mr.labels = append(mr.labels, l)
		}
	}
	mr.labels = slices.DeleteFunc(mr.labels, func(x string) bool {
		return slices.ContainsFunc(remove, func(r string) bool { return strings.EqualFold(x, r) })
	})
	if slices.Equal(before, mr.labels) {
		return
	}
	prev := mr.updated
	mr.updated = s.now()
	s.emitMRHook(mr, by, "update", hookExtra{changes: map[string]any{
		"labels":     change(s.labelsHook(mr.p, before), s.labelsHook(mr.p, mr.labels)),
		"updated_at": change(hookTime(prev), hookTime(mr.updated)),
	}})
}

// label is a project's label, created on first use.
type label struct {
	id      int64
	created time.Time
}

// labelsHook is the hook's form of label titles: Label#hook_attrs as in
// fixture webhook-merge_request-open.json (id, title, color, project_id,
// created_at, updated_at, template, description, type, group_id), an id
// fixed per project and title.
func (s *Server) labelsHook(p *project, titles []string) []any {
	out := []any{}
	for _, t := range titles {
		if p.labels == nil {
			p.labels = map[string]label{}
		}
		l, ok := p.labels[strings.ToLower(t)]
		if !ok {
			s.ids.label++
			l = label{id: s.ids.label, created: s.now()}
			p.labels[strings.ToLower(t)] = l
		}
		at := hookTime(l.created)
		out = append(out, map[string]any{
			"id": l.id, "title": t, "color": "#6699cc", "project_id": p.id, "created_at": at, "updated_at": at,
			"template": false, "description": nil, "type": "ProjectLabel", "group_id": nil,
		})
	}
	return out
}

// labelList splits a comma-separated label list as the merge request API
// takes it (labels, add_labels, remove_labels), dropping empty names.
func labelList(v string) []string {
	var out []string
	for _, l := range strings.Split(v, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
