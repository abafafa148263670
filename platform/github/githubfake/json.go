package githubfake

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// This file builds GitHub's JSON shapes (fixture_shapes_test.go checks them
// against testdata/github).

func (s *Server) stamp() string { return s.now().UTC().Format(time.RFC3339) }

// title is the first line of a commit message.
func title(msg string) string {
	first, _, _ := strings.Cut(msg, "\n")
	return first
}

func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func nodeID(kind string, id int64) string {
	return base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%s%d", kind, id))
}

func (s *Server) repoAPI(r *repo) string  { return s.URL() + "/repos/" + r.FullName }
func (s *Server) repoHTML(r *repo) string { return s.URL() + "/" + r.FullName }

// userJSON is a simple user (fixture api-pulls-get.json "user").
func (s *Server) userJSON(u *user) map[string]any {
	if u == nil {
		return nil
	}
	api := s.URL() + "/users/" + u.Login
	out := map[string]any{
		"login": u.Login, "id": u.ID, "node_id": nodeID("U_", u.ID),
		"avatar_url": s.URL() + "/avatars/" + u.Login, "gravatar_id": "", "url": api,
		"html_url": s.URL() + "/" + u.Login, "type": u.Type, "site_admin": false, "user_view_type": "public",
	}
	for _, f := range userURLFields {
		out[f[0]] = api + f[1]
	}
	return out
}

// loginJSON is the user login, or one made up for a login the fake does
// not know (a repository's owner).
func (s *Server) loginJSON(login string) map[string]any {
	if u := s.byLogin[login]; u != nil {
		return s.userJSON(u)
	}
	return s.userJSON(&user{User{ID: 1, Login: login, Type: "Organization"}})
}

// ownerJSON is the owner of r, a user of the fake or a login only.
func (s *Server) ownerJSON(r *repo) map[string]any {
	if u := s.byLogin[r.Owner]; u != nil {
		return s.userJSON(u)
	}
	return s.userJSON(&user{User{ID: 1, Login: r.Owner, Type: "Organization"}})
}

// privateUserFields are GET /user's private profile fields (fixture
// api-users-get-authenticated.json, its sample values).
func privateUserFields() map[string]any {
	return map[string]any{
		"name": "fake user", "company": nil, "blog": "", "location": nil, "email": nil, "hireable": nil, "bio": nil,
		"twitter_username": nil, "public_repos": 0, "public_gists": 0, "followers": 0, "following": 0,
		"created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "private_gists": 0,
		"total_private_repos": 0, "owned_private_repos": 0, "disk_usage": 0, "collaborators": 0,
		"two_factor_authentication": true, "plan": map[string]any{"name": "free", "space": 976562499, "private_repos": 10000, "collaborators": 0},
	}
}

// repoJSON is a full repository (fixture api-pulls-get.json head.repo; GET
// /repos/{o}/{r} adds more, the bot reads these).
func (s *Server) repoJSON(r *repo) map[string]any {
	api, html := s.repoAPI(r), s.repoHTML(r)
	out := map[string]any{
		"id": r.ID, "node_id": nodeID("R_", r.ID), "name": r.Name, "full_name": r.FullName,
		"owner": s.ownerJSON(r), "private": false, "html_url": html, "description": "", "fork": false, "url": api,
		"git_url": "git:" + s.URL()[len("http://"):] + "/" + r.FullName + ".git", "ssh_url": "git@fake:" + r.FullName + ".git",
		"clone_url": html + ".git", "mirror_url": nil, "svn_url": html, "homepage": nil, "language": nil,
		"forks_count": 0, "stargazers_count": 0, "watchers_count": 0, "size": 1, "default_branch": r.DefaultBranch,
		"open_issues_count": r.openPulls(), "topics": []any{}, "has_issues": true, "has_projects": false, "has_wiki": false,
		"has_pages": false, "has_downloads": false, "archived": false, "disabled": false,
		"pushed_at": s.stamp(), "created_at": ts(r.created), "updated_at": s.stamp(),
		"permissions":        map[string]any{"admin": false, "push": true, "pull": true},
		"allow_rebase_merge": !r.spec.DisallowRebase, "temp_clone_token": "", "allow_squash_merge": !r.spec.DisallowSquash,
		"allow_merge_commit": !r.spec.DisallowMergeCommit, "allow_forking": true, "forks": 0, "open_issues": r.openPulls(),
		"license": nil, "watchers": 0, "delete_branch_on_merge": false,
		"allow_auto_merge": false, "allow_update_branch": true, "has_discussions": false, "is_template": false,
		"merge_commit_message": "PR_TITLE", "merge_commit_title": "MERGE_MESSAGE",
		"squash_merge_commit_message": "COMMIT_MESSAGES", "squash_merge_commit_title": "COMMIT_OR_PR_TITLE",
		"use_squash_pr_title_as_default": false, "visibility": "public", "web_commit_signoff_required": false,
		"custom_properties": map[string]any{},
	}
	for _, f := range repoURLFields {
		out[f[0]] = api + f[1]
	}
	return out
}

func (r *repo) openPulls() int {
	n := 0
	for _, p := range r.pulls {
		if p.state == "open" {
			n++
		}
	}
	return n
}

// gitCommitJSON is a git commit (fixture api-git-create-commit.json).
func (s *Server) gitCommitJSON(r *repo, c *commit) map[string]any {
	parents := []any{}
	for _, p := range c.parents {
		parents = append(parents, map[string]any{"url": s.repoAPI(r) + "/git/commits/" + p, "sha": p, "html_url": s.repoHTML(r) + "/commit/" + p})
	}
	who := map[string]any{"date": ts(c.date), "name": c.author, "email": c.author + "@users.noreply.fake"}
	return map[string]any{
		"sha": c.sha, "node_id": "C_" + c.sha[:16], "url": s.repoAPI(r) + "/git/commits/" + c.sha,
		"author": who, "committer": who, "message": c.message,
		"tree":         map[string]any{"url": s.repoAPI(r) + "/git/trees/" + c.tree, "sha": c.tree},
		"parents":      parents,
		"verification": map[string]any{"verified": false, "reason": "unsigned", "signature": nil, "payload": nil},
		"html_url":     s.repoHTML(r) + "/commit/" + c.sha,
	}
}

// commitJSON is a repository commit (GET .../commits/{ref}, compare).
func (s *Server) commitJSON(r *repo, c *commit) map[string]any {
	g := s.gitCommitJSON(r, c)
	delete(g, "sha")
	delete(g, "node_id")
	delete(g, "html_url")
	g["comment_count"] = 0
	parents := []any{}
	for _, p := range c.parents {
		parents = append(parents, map[string]any{"sha": p, "url": s.repoAPI(r) + "/commits/" + p, "html_url": s.repoHTML(r) + "/commit/" + p})
	}
	return map[string]any{
		"sha": c.sha, "node_id": "C_" + c.sha[:16], "commit": g, "url": s.repoAPI(r) + "/commits/" + c.sha,
		"html_url": s.repoHTML(r) + "/commit/" + c.sha, "comments_url": s.repoAPI(r) + "/commits/" + c.sha + "/comments",
		"author": s.loginJSON(c.author), "committer": s.loginJSON(c.author), "parents": parents,
	}
}

// branchRefJSON is a pull request's head or base.
func (s *Server) branchRefJSON(r *repo, branch, sha string) map[string]any {
	return map[string]any{"label": r.Owner + ":" + branch, "ref": branch, "sha": sha, "user": s.ownerJSON(r), "repo": s.repoJSON(r)}
}

// pullJSON is a pull request (fixture api-pulls-get.json). The list
// entity (full false) lacks the mergeability and size fields, as on
// GitHub. Reading it in full is a read of mergeable (null on the first
// read after a change).
func (s *Server) pullJSON(r *repo, pr *pull, full bool) map[string]any {
	api := s.repoAPI(r) + "/pulls/" + strconv.FormatInt(pr.number, 10)
	html := s.repoHTML(r) + "/pull/" + strconv.FormatInt(pr.number, 10)
	issue := s.repoAPI(r) + "/issues/" + strconv.FormatInt(pr.number, 10)
	head := s.headOf(r, pr)
	var mergeCommit any
	if pr.merged {
		mergeCommit = pr.mergeSHA
	}
	out := map[string]any{
		"url": api, "id": pr.id, "node_id": nodeID("PR_", pr.id), "html_url": html, "diff_url": html + ".diff",
		"patch_url": html + ".patch", "issue_url": issue, "commits_url": api + "/commits",
		"review_comments_url": api + "/comments", "review_comment_url": s.repoAPI(r) + "/pulls/comments{/number}",
		"comments_url": issue + "/comments", "statuses_url": s.repoAPI(r) + "/statuses/" + head,
		"number": pr.number, "state": pr.state, "locked": false, "title": pr.title, "user": s.userJSON(pr.author),
		"body": pr.body, "labels": s.labelsJSON(r, pr), "milestone": nil, "active_lock_reason": nil,
		"created_at": ts(pr.created), "updated_at": ts(pr.updated), "closed_at": ts(pr.closedAt), "merged_at": ts(pr.mergedAt),
		"merge_commit_sha": mergeCommit, "assignee": nil, "assignees": []any{}, "requested_reviewers": []any{},
		"requested_teams": []any{}, "head": s.branchRefJSON(r, pr.head, head), "base": s.branchRefJSON(r, pr.base, r.refs[pr.base]),
		"_links": map[string]any{
			"self": map[string]any{"href": api}, "html": map[string]any{"href": html}, "issue": map[string]any{"href": issue},
			"comments": map[string]any{"href": issue + "/comments"}, "review_comments": map[string]any{"href": api + "/comments"},
			"review_comment": map[string]any{"href": s.repoAPI(r) + "/pulls/comments{/number}"},
			"commits":        map[string]any{"href": api + "/commits"}, "statuses": map[string]any{"href": s.repoAPI(r) + "/statuses/" + head},
		},
		"author_association": "MEMBER", "auto_merge": nil, "draft": pr.draft,
	}
	if !full {
		return out
	}
	mergeable, state := s.mergeableJSON(r, pr)
	var rebaseable any
	if mergeable != nil {
		rebaseable = mergeable
		// GitHub computes a test merge commit once mergeable is known.
		if !pr.merged && mergeable == true {
			out["merge_commit_sha"] = hashOf("test-merge", head, r.refs[pr.base])
		}
	}
	out["merged"] = pr.merged
	out["mergeable"] = mergeable
	out["rebaseable"] = rebaseable
	out["mergeable_state"] = state
	out["merged_by"] = s.userJSON(pr.mergedBy)
	out["comments"] = len(r.sortedComments(pr.number))
	out["review_comments"] = 0
	out["maintainer_can_modify"] = false
	out["commits"] = 1
	out["additions"] = 1
	out["deletions"] = 0
	out["changed_files"] = 1
	return out
}

// reviewJSON is a review (fixtures api-pulls-create-review.json,
// api-pulls-list-reviews.json).
func (s *Server) reviewJSON(r *repo, pr *pull, rv *review) map[string]any {
	html := fmt.Sprintf("%s/pull/%d#pullrequestreview-%d", s.repoHTML(r), pr.number, rv.id)
	api := fmt.Sprintf("%s/pulls/%d", s.repoAPI(r), pr.number)
	return map[string]any{
		"id": rv.id, "node_id": nodeID("PRR_", rv.id), "user": s.userJSON(rv.user), "body": rv.body, "state": rv.state,
		"html_url": html, "pull_request_url": api,
		"_links":       map[string]any{"html": map[string]any{"href": html}, "pull_request": map[string]any{"href": api}},
		"submitted_at": ts(rv.at), "commit_id": rv.commitID, "author_association": "COLLABORATOR",
	}
}

// commentJSON is an issue comment (fixture api-issues-comment.json).
func (s *Server) commentJSON(r *repo, c *comment) map[string]any {
	return map[string]any{
		"id": c.id, "node_id": nodeID("IC_", c.id), "url": s.repoAPI(r) + "/issues/comments/" + strconv.FormatInt(c.id, 10),
		"html_url": fmt.Sprintf("%s/pull/%d#issuecomment-%d", s.repoHTML(r), c.number, c.id), "body": c.body,
		"user": s.userJSON(c.user), "created_at": ts(c.created), "updated_at": ts(c.updated),
		"issue_url": s.repoAPI(r) + "/issues/" + strconv.FormatInt(c.number, 10), "author_association": "COLLABORATOR",
		"performed_via_github_app": nil,
	}
}

// appJSON is the App that owns a check run (fixture
// api-checks-list-for-ref.json "app").
func (s *Server) appJSON(slug string) map[string]any {
	return map[string]any{
		"id": 1, "slug": slug, "node_id": "A_" + slug, "owner": s.userJSON(&user{User{ID: 1, Login: slug, Type: "Organization"}}),
		"name": slug, "description": "", "external_url": s.URL(), "html_url": s.URL() + "/apps/" + slug,
		"created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
		"permissions": appPermissions(), "events": []any{"push", "pull_request"}, "client_id": "Iv1." + slug,
	}
}

// suiteJSON is a check suite as webhooks carry it (fixture
// webhook-check_suite-completed.json).
func (s *Server) suiteJSON(r *repo, id int64, sha string, branch any, status string, conclusion any, created, updated time.Time) map[string]any {
	return map[string]any{
		"id": id, "node_id": nodeID("CS_", id), "head_branch": branch, "head_sha": sha,
		"status": status, "conclusion": conclusion, "url": s.repoAPI(r) + "/check-suites/" + strconv.FormatInt(id, 10),
		"before": nil, "after": sha, "pull_requests": s.pullRefsJSON(r, sha), "app": s.appJSON("github-actions"),
		"created_at": ts(created), "updated_at": ts(updated), "rerequestable": true, "runs_rerequestable": true,
		"check_runs_url": s.repoAPI(r) + "/check-suites/" + strconv.FormatInt(id, 10) + "/check-runs",
	}
}

// appPermissions are an App's permissions as the webhook fixtures list
// them (webhook-check_run-completed.json, api-checks-list-for-ref.json).
func appPermissions() map[string]any {
	out := map[string]any{}
	for _, k := range []string{"actions", "administration", "attestations", "checks", "contents", "deployments", "discussions",
		"issues", "merge_queues", "models", "packages", "pages", "pull_requests", "repository_hooks", "repository_projects",
		"security_events", "single_file", "statuses", "vulnerability_alerts"} {
		out[k] = "write"
	}
	out["metadata"] = "read"
	return out
}

// pullRefsJSON are the open pull requests whose head is sha, as check runs
// and suites list them.
func (s *Server) pullRefsJSON(r *repo, sha string) []any {
	out := []any{}
	for _, pr := range r.sortedPulls() {
		if pr.state != "open" || s.headOf(r, pr) != sha {
			continue
		}
		repoRef := map[string]any{"id": r.ID, "url": s.repoAPI(r), "name": r.Name}
		out = append(out, map[string]any{
			"url": fmt.Sprintf("%s/pulls/%d", s.repoAPI(r), pr.number), "id": pr.id, "number": pr.number,
			"head": map[string]any{"ref": pr.head, "sha": sha, "repo": repoRef},
			"base": map[string]any{"ref": pr.base, "sha": r.refs[pr.base], "repo": repoRef},
		})
	}
	return out
}

// checkRunJSON is a check run (fixture api-checks-list-for-ref.json).
func (s *Server) checkRunJSON(r *repo, c *checkRun) map[string]any {
	var conclusion any
	if c.status == "completed" {
		conclusion = c.conclusion
	}
	id := strconv.FormatInt(c.id, 10)
	return map[string]any{
		"id": c.id, "head_sha": c.sha, "node_id": nodeID("CR_", c.id), "external_id": "",
		"url": s.repoAPI(r) + "/check-runs/" + id, "html_url": s.repoHTML(r) + "/runs/" + id, "details_url": s.repoHTML(r) + "/runs/" + id,
		"status": c.status, "conclusion": conclusion, "started_at": ts(c.started), "completed_at": ts(c.completed),
		"output": map[string]any{"title": c.name, "summary": "", "text": "", "annotations_count": 0,
			"annotations_url": s.repoAPI(r) + "/check-runs/" + id + "/annotations"},
		"name": c.name, "check_suite": map[string]any{"id": c.suite}, "app": s.appJSON(c.app),
		"pull_requests": s.pullRefsJSON(r, c.sha),
	}
}

// statusJSON is a commit status (fixture api-repos-combined-status.json).
func (s *Server) statusJSON(r *repo, st *status) map[string]any {
	return map[string]any{
		"url": s.repoAPI(r) + "/statuses/" + st.sha, "avatar_url": s.URL() + "/avatars/ci", "id": st.id,
		"node_id": nodeID("SC_", st.id), "state": st.state, "description": st.context + " " + st.state,
		"target_url": st.url, "context": st.context, "created_at": ts(st.at), "updated_at": ts(st.at),
	}
}

// workflowRunJSON is a workflow run (fixture
// api-actions-list-workflow-runs.json).
func (s *Server) workflowRunJSON(r *repo, run *workflowRun) map[string]any {
	var conclusion any
	if run.status == "completed" {
		conclusion = run.conclusion
	}
	api := s.repoAPI(r) + "/actions/runs/" + strconv.FormatInt(run.id, 10)
	c := s.objects.commits[run.sha]
	head := map[string]any{"id": run.sha, "tree_id": c.tree, "message": c.message, "timestamp": ts(c.date),
		"author":    map[string]any{"name": c.author, "email": c.author + "@users.noreply.fake"},
		"committer": map[string]any{"name": c.author, "email": c.author + "@users.noreply.fake"}}
	return map[string]any{
		"id": run.id, "name": "CI", "node_id": nodeID("WFR_", run.id), "head_branch": run.branch, "head_sha": run.sha,
		"run_number": run.id, "event": "push", "status": run.status, "conclusion": conclusion, "workflow_id": 1,
		"check_suite_id": run.suite, "run_attempt": run.attempt,
		"url": api, "html_url": s.repoHTML(r) + "/actions/runs/" + strconv.FormatInt(run.id, 10),
		"pull_requests": s.pullRefsJSON(r, run.sha), "created_at": ts(run.created), "updated_at": ts(run.updated),
		"jobs_url": api + "/jobs", "logs_url": api + "/logs", "check_suite_url": s.repoAPI(r) + "/check-suites/" + strconv.FormatInt(run.suite, 10),
		"artifacts_url": api + "/artifacts", "cancel_url": api + "/cancel", "rerun_url": api + "/rerun",
		"workflow_url": s.repoAPI(r) + "/actions/workflows/1", "head_commit": head,
		"actor": s.loginJSON(c.author), "triggering_actor": s.loginJSON(c.author), "check_suite_node_id": nodeID("CS_", run.suite),
		"display_title": title(c.message), "path": ".github/workflows/ci.yml", "previous_attempt_url": nil, "run_started_at": ts(run.created),
		"repository": s.repoJSON(r), "head_repository": s.repoJSON(r),
	}
}
