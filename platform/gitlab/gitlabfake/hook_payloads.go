package gitlabfake

import (
	"encoding/json"
	"fmt"
)

// hookExtra carries what differs between Merge Request Hook actions.
type hookExtra struct {
	// oldrev is set only when the head changed (push, rebase).
	oldrev  string
	changes map[string]any
	// computing, when set, is the merge_status and detailed_merge_status
	// the hook carries instead of the computed ones: GitLab checks
	// mergeability asynchronously, so a hook sent at open says "checking"
	// (fixture webhook-merge_request-open-gitlabcom.json, a real gitlab.com
	// delivery) and one after a push "unchecked" (the push marks the MR
	// unchecked, webhook-merge_request-update-push.json). GET MR answers
	// the computed status at once (Server's deliberate differences).
	computing string
}

// emitMRHook queues a Merge Request Hook (fixtures
// webhook-merge_request-*.json) for action by u.
func (s *Server) emitMRHook(mr *mergeRequest, u *user, action string, x hookExtra) {
	attrs := s.mrHookAttrs(mr)
	attrs["action"] = action
	if x.oldrev != "" {
		attrs["oldrev"] = x.oldrev
	}
	if x.computing != "" && mr.state == stateOpened {
		attrs["merge_status"], attrs["detailed_merge_status"] = x.computing, x.computing
	}
	changes := x.changes
	if changes == nil {
		changes = map[string]any{}
	}
	s.emit(EventMergeRequest, mr.p, map[string]any{
		"object_kind": "merge_request", "event_type": "merge_request",
		"user": s.userHook(u), "project": s.projectHook(mr.p), "repository": s.repositoryHook(mr.p),
		"object_attributes": attrs, "labels": s.labelsHook(mr.p, mr.labels), "changes": changes,
		"assignees": []any{}, "reviewers": s.reviewersHook(mr),
	})
}

// emitPipelineHook queues a Pipeline Hook (fixture
// webhook-pipeline-mr-success.json); merge_request only for MR pipelines.
func (s *Server) emitPipelineHook(pl *pipeline) {
	p := pl.p
	stage, job := "deploy", "deploy"
	if pl.mr != nil || pl.branchOf != nil {
		stage, job = "test", "test"
	}
	var finished any
	if !pl.finished.IsZero() {
		finished = hookTime(pl.finished)
	}
	build := map[string]any{
		"id": pl.jobID, "stage": stage, "name": job, "status": pl.status,
		"created_at": hookTime(pl.created), "started_at": hookTime(pl.started), "finished_at": finished,
		"duration": pl.duration(), "queued_duration": 0.0, "failure_reason": nil,
		"when": "on_success", "manual": false, "allow_failure": false, "user": s.userHook(pl.user),
		"runner": map[string]any{
			"id": 1, "description": "gitlabfake-runner", "runner_type": "instance_type",
			"active": true, "is_shared": true, "tags": []string{},
		},
		"artifacts_file": map[string]any{"filename": nil, "size": nil},
		"environment":    nil,
	}
	if pl.status == "failed" {
		build["failure_reason"] = "script_failure"
	}
	if pl.mr == nil && pl.branchOf == nil {
		build["environment"] = map[string]any{"name": "production", "action": "start", "deployment_tier": "production"}
	}
	payload := map[string]any{
		"object_kind": "pipeline",
		"object_attributes": map[string]any{
			"id": pl.id, "iid": pl.iid, "name": nil, "ref": pl.ref, "tag": false, "sha": pl.sha,
			"before_sha": pl.before, "source": pl.source, "status": pl.status,
			"detailed_status": statusText(pl.status), "stages": []string{stage},
			"created_at": hookTime(pl.created), "finished_at": finished, "duration": pl.duration(),
			"queued_duration": 0, "variables": []any{}, "url": s.pipelineURL(pl),
		},
		"merge_request": nil,
		"user":          s.userHook(pl.user),
		"project":       s.projectHook(p),
		"commit":        s.commitHook(p, pl.sha),
		"builds":        []any{build},
	}
	if mr := pl.mr; mr != nil {
		payload["merge_request"] = map[string]any{
			"id": mr.id, "iid": mr.iid, "title": mr.title,
			"source_branch": mr.sourceBranch, "source_project_id": p.id,
			"target_branch": mr.targetBranch, "target_project_id": p.id,
			"state": mr.state, "merge_status": s.mergeStatus(mr),
			"detailed_merge_status": s.detailedStatus(mr), "url": s.mrURL(mr),
		}
	} else {
		delete(payload, "merge_request")
	}
	s.emit(EventPipeline, p, payload)
}

// emitNoteHook queues a Note Hook (fixture webhook-note-mr.json) for a user
// note; u is the note's author (also for edits, as GitLab 16.11+ does).
func (s *Server) emitNoteHook(n *note, u *user, action string) {
	mr := n.mr
	mrAttrs := s.mrHookAttrs(mr)
	mrAttrs["position"] = 0
	s.emit(EventNote, mr.p, map[string]any{
		"object_kind": "note", "event_type": "note",
		"user": s.userHook(u), "project_id": mr.p.id,
		"project": s.projectHook(mr.p), "repository": s.repositoryHook(mr.p),
		"object_attributes": map[string]any{
			"id": n.id, "note": n.body, "noteable_type": "MergeRequest", "author_id": n.author.id,
			"created_at": hookTime(n.created), "updated_at": hookTime(n.updated),
			"project_id": mr.p.id, "attachment": nil, "line_code": nil, "commit_id": "",
			"noteable_id": mr.id, "system": false, "st_diff": nil, "action": action,
			"type": nil, "position": nil, "original_position": nil, "change_position": nil,
			"resolved_at": nil, "resolved_by_id": nil, "resolved_by_push": nil,
			"discussion_id": fmt.Sprintf("%040x", n.id), "confidential": false, "internal": false,
			"updated_by_id": nil, "url": fmt.Sprintf("%s#note_%d", s.mrURL(mr), n.id),
		},
		"merge_request": mrAttrs,
	})
}

func (s *Server) emit(event string, p *project, payload map[string]any) {
	body, err := json.Marshal(payload)
	if err != nil {
		s.log.Error("encoding webhook payload", "event", event, "error", err)
		return
	}
	s.enqueue(event, p.id, body)
}

// mrHookAttrs is MergeRequest#hook_attrs: object_attributes of the Merge
// Request Hook and merge_request of the Note Hook, without action/oldrev.
func (s *Server) mrHookAttrs(mr *mergeRequest) map[string]any {
	p := mr.p
	var headID any
	if hp := s.headPipeline(mr); hp != nil {
		headID = hp.id
	}
	var editedAt, editedBy, mergeUser any
	if mr.editedBy != nil {
		editedAt, editedBy = hookTime(mr.editedAt), mr.editedBy.id
	}
	if mr.mergedBy != nil {
		mergeUser = mr.mergedBy.id
	}
	force := "0"
	if mr.removeSource {
		force = "1"
	}
	return map[string]any{
		"id": mr.id, "iid": mr.iid, "title": mr.title, "description": mr.description,
		"state": mr.state, "state_id": stateIDs[mr.state],
		"source_branch": mr.sourceBranch, "source_project_id": p.id,
		"target_branch": mr.targetBranch, "target_project_id": p.id,
		"author_id": mr.author.id, "assignee_id": nil, "assignee_ids": []any{}, "reviewer_ids": []any{},
		"created_at": hookTime(mr.created), "updated_at": hookTime(mr.updated), "updated_by_id": editedBy,
		"last_edited_at": editedAt, "last_edited_by_id": editedBy, "prepared_at": hookTime(mr.created),
		"merge_commit_sha": strOrNil(mr.mergeCommitSHA), "merge_error": strOrNil(mr.mergeError),
		"merge_params": map[string]any{"force_remove_source_branch": force},
		"merge_status": s.mergeStatus(mr), "detailed_merge_status": s.detailedStatus(mr),
		"merge_user_id": mergeUser, "merge_when_pipeline_succeeds": false,
		"head_pipeline_id": headID, "milestone_id": nil, "draft": mr.block.Draft, "work_in_progress": mr.block.Draft,
		"time_estimate": 0, "total_time_spent": 0, "time_change": 0,
		"human_total_time_spent": nil, "human_time_change": nil, "human_time_estimate": nil,
		"blocking_discussions_resolved": true, "first_contribution": false,
		"labels": s.labelsHook(p, mr.labels), "approval_rules": []any{},
		"url": s.mrURL(mr), "source": s.projectHook(p), "target": s.projectHook(p),
		"last_commit": s.commitHook(p, mr.sha),
	}
}

// projectHook is Project#hook_attrs.
func (s *Server) projectHook(p *project) map[string]any {
	web := s.projectURL(p)
	ssh := "git@" + hostOf(s.baseURL()) + ":" + p.PathWithNamespace + ".git"
	return map[string]any{
		"id": p.id, "name": p.name(), "description": "", "web_url": web, "avatar_url": nil,
		"git_ssh_url": ssh, "git_http_url": web + ".git", "namespace": p.namespace(),
		"visibility_level": 10, "path_with_namespace": p.PathWithNamespace,
		"default_branch": p.DefaultBranch, "ci_config_path": "",
		"homepage": web, "url": ssh, "ssh_url": ssh, "http_url": web + ".git",
	}
}

func (s *Server) repositoryHook(p *project) map[string]any {
	web := s.projectURL(p)
	return map[string]any{"name": p.name(), "url": "git@" + hostOf(s.baseURL()) + ":" + p.PathWithNamespace + ".git", "description": "", "homepage": web}
}

// commitHook is Commit#hook_attrs (last_commit, commit).
func (s *Server) commitHook(p *project, sha string) map[string]any {
	c := p.repo.commits[sha]
	if c == nil {
		return map[string]any{"id": sha}
	}
	name, email := "GitLab", "[REDACTED]"
	if c.author != nil {
		name, email = c.author.name, c.author.email
	}
	return map[string]any{
		"id": c.id, "message": c.message, "title": c.title(),
		"timestamp": c.at.UTC().Format("2006-01-02T15:04:05-07:00"),
		"url":       s.projectURL(p) + "/-/commit/" + c.id,
		"author":    map[string]any{"name": name, "email": email},
	}
}
