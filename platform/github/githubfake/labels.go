package githubfake

import (
	"maps"
	"net/url"
	"slices"
	"strings"
)

// DeveloperPull describes a pull request a person opens by hand
// (Server.OpenPullAsUser): branch Head from Base with Files committed by
// Login, then the pull request with Labels.
type DeveloperPull struct {
	RepoID     int64
	Login      string
	Head, Base string
	Title      string
	Files      map[string]string // path -> content
	Labels     []string
}

// OpenPullAsUser makes d.Login push branch d.Head and open a pull request
// from it, as a developer would: the push, CI on the head, and the
// pull_request "opened" webhook whose pull_request.labels carry d.Labels
// (labels set at creation, as a person does in the form). It returns the
// number, 0 when the repository or the base does not exist.
func (s *Server) OpenPullAsUser(d DeveloperPull) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[d.RepoID]
	if r == nil || r.refs[d.Base] == "" {
		return 0
	}
	by := s.byLogin[d.Login]
	if by == nil {
		return 0
	}
	tip := r.refs[d.Base]
	files := maps.Clone(s.objects.trees[s.objects.commits[tip].tree])
	for path, content := range d.Files {
		files[path] = s.objects.putBlob(content)
	}
	c := s.putCommit(s.objects.putTree(files), []string{tip}, d.Title, d.Login)
	s.moveRef(r, d.Head, c.sha, by)
	s.ids.pull++
	r.number++
	now := s.now().UTC()
	pr := &pull{id: s.ids.pull, number: r.number, title: d.Title, head: d.Head, base: d.Base,
		state: "open", author: by, created: now, updated: now, labels: slices.Clone(d.Labels)}
	r.pulls[pr.number] = pr
	s.emitPull(r, pr, "opened", by, nil)
	s.startCI(r, r.refs[d.Head], d.Head)
	return pr.number
}

// SetLabelsAs makes login add then remove labels on pull request number,
// as POST and DELETE /repos/{o}/{r}/issues/{n}/labels do (docs.github.com
// "Labels"): one pull_request "labeled" or "unlabeled" webhook per label
// that changed, with the label and pull_request.labels as they are after it
// (docs.github.com "Webhook events and payloads", pull_request labeled).
func (s *Server) SetLabelsAs(repoID, number int64, login string, add, remove []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	if r == nil || r.pulls[number] == nil || s.byLogin[login] == nil {
		return
	}
	pr, by := r.pulls[number], s.byLogin[login]
	for _, l := range add {
		if !slices.ContainsFunc(pr.labels, func(x string) bool { return strings.EqualFold(x, l) }) {
			pr.labels = append(pr.labels, l)
			pr.updated = s.now().UTC()
			s.emitPull(r, pr, "labeled", by, map[string]any{"label": s.labelJSON(r, l)})
		}
	}
	for _, l := range remove {
		if i := slices.IndexFunc(pr.labels, func(x string) bool { return strings.EqualFold(x, l) }); i >= 0 {
			name := pr.labels[i]
			pr.labels = slices.Delete(pr.labels, i, i+1)
			pr.updated = s.now().UTC()
			s.emitPull(r, pr, "unlabeled", by, map[string]any{"label": s.labelJSON(r, name)})
		}
	}
}

// labelJSON is a label as the REST API and webhooks show it (docs.github.com
// "Labels": id, node_id, url, name, color, default, description); its id is
// fixed per repository and name.
func (s *Server) labelJSON(r *repo, name string) map[string]any {
	if r.labels == nil {
		r.labels = map[string]int64{}
	}
	id, ok := r.labels[strings.ToLower(name)]
	if !ok {
		s.ids.label++
		id = s.ids.label
		r.labels[strings.ToLower(name)] = id
	}
	return map[string]any{
		"id": id, "node_id": nodeID("LA_", id), "url": s.repoAPI(r) + "/labels/" + url.PathEscape(name),
		"name": name, "color": "ededed", "default": false, "description": nil,
	}
}

// labelsJSON are pr's labels (pull_request.labels).
func (s *Server) labelsJSON(r *repo, pr *pull) []any {
	out := []any{}
	for _, l := range pr.labels {
		out = append(out, s.labelJSON(r, l))
	}
	return out
}

// RequestReviewAs makes login request reviewer's review of pull request
// number, as POST /repos/{o}/{r}/pulls/{n}/requested_reviewers does
// (docs.github.com "Review requests"): the pull_request "review_requested"
// webhook with requested_reviewer (docs.github.com "Webhook events and
// payloads", pull_request review_requested). Every request sends it, as
// GitHub does when a review is requested again.
func (s *Server) RequestReviewAs(repoID, number int64, login, reviewer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	if r == nil || r.pulls[number] == nil || s.byLogin[login] == nil || s.byLogin[reviewer] == nil {
		return
	}
	s.emitPull(r, r.pulls[number], "review_requested", s.byLogin[login], map[string]any{"requested_reviewer": s.userJSON(s.byLogin[reviewer])})
}
