package gitlabfake

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// PipelineScript decides how a project's future pipelines end.
type PipelineScript struct {
	// MR decides the outcome of each MR pipeline in creation order:
	// outcomes[0] for the first, etc.; the last entry repeats. Empty =
	// always "success". Values: "success" | "failed" | "canceled" |
	// "running" (never finishes) | "manual", "scheduled" or
	// "waiting_for_resource" (reached after Duration like a final status,
	// then kept: the pipeline waits for a person and never finishes by
	// itself).
	MR []string
	// Deploy decides the outcome of pipelines on protected branches
	// (source "push", started by a merge or any other push to them), in the
	// same way.
	Deploy []string
	// Duration is how long a pipeline stays "running" before finishing
	// (0 = finishes right away, still emitting the "running" and the final
	// Pipeline Hook asynchronously).
	Duration time.Duration
}

// SetPipelineScript sets how future pipelines of the project behave and
// restarts the outcome sequences at their first entries.
func (s *Server) SetPipelineScript(projectID int64, script PipelineScript) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.projects[projectID]; p != nil {
		p.script, p.mrRuns, p.deployRun = script, 0, 0
	}
}

// nullSHA is GitLab's before_sha for a pipeline without a previous commit.
const nullSHA = "0000000000000000000000000000000000000000"

type pipeline struct {
	id, iid                  int64
	p                        *project
	sha, before, ref, source string
	status, outcome          string
	mr                       *mergeRequest // nil unless source merge_request_event
	// branchOf is the open merge request whose source branch a branch
	// pipeline (source api) runs on: GitLab counts such a pipeline at the
	// head sha as the merge request's head pipeline, and lists it among
	// the merge request's pipelines. Its outcome is the next MR outcome.
	branchOf                            *mergeRequest
	user                                *user
	jobID                               int64
	created, updated, started, finished time.Time
	onFinish                            func(*pipeline) // a merge train car's (merge_trains.go)
}

type pipelineSpec struct {
	sha, before, ref, source string
	mr, branchOf             *mergeRequest
	user                     *user
	// ignoreSkip: created through POST /projects/:id/pipeline, which runs
	// whatever the commit message says (skipPattern).
	ignoreSkip bool
}

// skipPattern is GitLab's: a pipeline whose commit message matches is
// created with status skipped and runs nothing, except one created
// through the API, a trigger, a schedule or the web form
// (lib/gitlab/ci/pipeline/chain/skip.rb SKIP_PATTERN).
var skipPattern = regexp.MustCompile(`(?i)\[(ci[ _-]skip|skip[ _-]ci)\]`)

func nextOutcome(outcomes []string, n *int) string {
	if len(outcomes) == 0 {
		return "success"
	}
	o := outcomes[min(*n, len(outcomes)-1)]
	*n++
	return o
}

// waitingStatus are the pipeline statuses that wait for a person (or a
// time, or a resource) rather than finish (doc/api/pipelines.md).
var waitingStatus = map[string]bool{"manual": true, "scheduled": true, "waiting_for_resource": true}

// startPipeline creates a pending pipeline that turns "running" right away
// and reaches its scripted outcome after PipelineScript.Duration, emitting a
// Pipeline Hook at each of those two changes.
//
// A pipeline whose commit message matches skipPattern (and not created
// through the API) is skipped instead: status "skipped", finished at once,
// one Pipeline Hook, and no scripted outcome used.
func (s *Server) startPipeline(p *project, spec pipelineSpec) *pipeline {
	if c := p.repo.commits[spec.sha]; c != nil && !spec.ignoreSkip && skipPattern.MatchString(c.message) {
		return s.skipPipeline(p, spec)
	}
	outcome := nextOutcome(p.script.Deploy, &p.deployRun)
	if spec.mr != nil || spec.branchOf != nil {
		outcome = nextOutcome(p.script.MR, &p.mrRuns)
	}
	pl := s.addPipeline(p, spec, "pending", outcome)
	dur := p.script.Duration
	s.schedule(0, func() {
		pl.status, pl.started, pl.updated = "running", s.now(), s.now()
		s.emitPipelineHook(pl)
		if outcome == "running" {
			return
		}
		s.schedule(dur, func() {
			pl.status, pl.updated = outcome, s.now()
			if !waitingStatus[outcome] {
				pl.finished = s.now()
			}
			s.emitPipelineHook(pl)
			if pl.onFinish != nil && !waitingStatus[outcome] {
				pl.onFinish(pl)
			}
		})
	})
	return pl
}

// skipPipeline records the skipped pipeline of spec (startPipeline): GitLab
// saves it with status skipped, which counts as finished, and sends its
// Pipeline Hook.
func (s *Server) skipPipeline(p *project, spec pipelineSpec) *pipeline {
	pl := s.addPipeline(p, spec, "skipped", "skipped")
	pl.finished = pl.created
	s.schedule(0, func() { s.emitPipelineHook(pl) })
	return pl
}

// addPipeline records a new pipeline of spec in status, to end in
// outcome, with the next ids.
func (s *Server) addPipeline(p *project, spec pipelineSpec, status, outcome string) *pipeline {
	s.ids.pipeline++
	s.ids.job++
	p.pipeIID++
	now := s.now()
	pl := &pipeline{
		id: s.ids.pipeline, iid: p.pipeIID, p: p, sha: spec.sha, before: cmpOr(spec.before, nullSHA),
		ref: spec.ref, source: spec.source, status: status, outcome: outcome, mr: spec.mr,
		branchOf: spec.branchOf, user: spec.user, jobID: s.ids.job, created: now, updated: now,
	}
	p.pipelines = append(p.pipelines, pl)
	return pl
}

// SkippedPipelineCount is how many pipelines of the project were skipped
// because their commit message said so (skipPattern).
func (s *Server) SkippedPipelineCount(projectID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	if p := s.projects[projectID]; p != nil {
		for _, pl := range p.pipelines {
			if pl.status == "skipped" {
				n++
			}
		}
	}
	return n
}

// startMRPipeline starts a detached MR pipeline for the MR head
// (ref refs/merge-requests/<iid>/head, source merge_request_event).
func (s *Server) startMRPipeline(mr *mergeRequest, by *user) *pipeline {
	return s.startPipeline(mr.p, pipelineSpec{
		sha: mr.sha, ref: fmt.Sprintf("refs/merge-requests/%d/head", mr.iid),
		source: "merge_request_event", mr: mr, user: by,
	})
}

// headPipeline is the newest pipeline of the MR (an MR pipeline, or a
// branch pipeline of its source branch: GitLab's diff_head_pipeline) for
// its current head, nil if none.
func (s *Server) headPipeline(mr *mergeRequest) *pipeline {
	ps := mr.p.pipelines
	for i := len(ps) - 1; i >= 0; i-- {
		if (ps[i].mr == mr || ps[i].branchOf == mr) && ps[i].sha == mr.sha {
			return ps[i]
		}
	}
	return nil
}

func (pl *pipeline) duration() any {
	if pl.finished.IsZero() || pl.started.IsZero() {
		return nil
	}
	return int(pl.finished.Sub(pl.started).Seconds())
}

// statusText is detailed_status.text ("passed" for success).
func statusText(status string) string {
	if status == "success" {
		return "passed"
	}
	return status
}

func (s *Server) pipelineURL(pl *pipeline) string {
	return fmt.Sprintf("%s/-/pipelines/%d", s.projectURL(pl.p), pl.id)
}

// pipelineJSON is API::Entities::Ci::PipelineBasic, or with detail
// Ci::Pipeline (head_pipeline in api-mr-get.json, api-mr-pipeline-create.json).
func (s *Server) pipelineJSON(pl *pipeline, detail bool) map[string]any {
	m := map[string]any{
		"id": pl.id, "iid": pl.iid, "project_id": pl.p.id, "sha": pl.sha, "ref": pl.ref,
		"status": pl.status, "source": pl.source, "name": nil,
		"created_at": restTime(pl.created), "updated_at": restTime(pl.updated), "web_url": s.pipelineURL(pl),
	}
	if !detail {
		return m
	}
	text := statusText(pl.status)
	m["before_sha"] = pl.before
	m["tag"] = false
	m["yaml_errors"] = nil
	m["user"] = s.userBasic(pl.user)
	m["started_at"] = timeOrNil(pl.started)
	m["finished_at"] = timeOrNil(pl.finished)
	m["committed_at"] = nil
	m["duration"] = pl.duration()
	m["queued_duration"] = 0
	m["coverage"] = nil
	path := fmt.Sprintf("/%s/-/pipelines/%d", pl.p.PathWithNamespace, pl.id)
	m["detailed_status"] = map[string]any{
		"icon": "status_" + pl.status, "text": text, "label": text, "group": pl.status,
		"tooltip": text, "has_details": true, "details_path": path, "illustration": nil,
		"favicon": "/assets/ci_favicons/favicon_status_" + pl.status + ".png",
	}
	return m
}

// listMRPipelines serves GET .../merge_requests/:iid/pipelines, newest
// first (fixture api-mr-pipelines-list.json).
func (s *Server) listMRPipelines(rc *reqCtx) {
	_, mr := s.mr(rc)
	if mr == nil {
		return
	}
	items := []any{}
	ps := mr.p.pipelines
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].mr == mr || ps[i].branchOf == mr {
			items = append(items, s.pipelineJSON(ps[i], false))
		}
	}
	rc.paginate(items)
}

// createMRPipeline serves POST .../merge_requests/:iid/pipelines: a new MR
// pipeline for the head, 201 (fixture api-mr-pipeline-create.json).
func (s *Server) createMRPipeline(rc *reqCtx) {
	_, mr := s.mr(rc)
	if mr == nil || !rc.requireAccess(mr.p, AccessDeveloper) {
		return
	}
	if mr.state != stateOpened {
		rc.fail(http.StatusBadRequest, "Merge request is not open")
		return
	}
	rc.writeJSON(http.StatusCreated, s.pipelineJSON(s.startMRPipeline(mr, rc.user), true))
}

// createPipeline serves POST /projects/:id/pipeline (ref, in the JSON body
// as client-go sends it or the query string): a pipeline of source "api"
// at the branch's head, 201 with the Pipeline entity (doc/api/pipelines.md
// "Create a new pipeline"; the shape of fixture api-mr-pipeline-create.json).
// It runs whatever the head commit's message says (GitLab passes
// ignore_skip_ci). On the source branch of an open MR it is that MR's head
// pipeline and takes the next MR outcome. 400 "Reference not found" for a
// missing branch; Developer needed.
func (s *Server) createPipeline(rc *reqCtx) {
	p := s.project(rc)
	if p == nil || !rc.requireAccess(p, AccessDeveloper) {
		return
	}
	ref := rc.get("ref")
	if ref == "" {
		rc.missing("ref")
		return
	}
	sha, ok := p.repo.branches[ref]
	if !ok {
		rc.fail(http.StatusBadRequest, map[string]any{"base": []string{"Reference not found"}})
		return
	}
	var of *mergeRequest
	for _, mr := range p.sortedMRs() {
		if mr.state == stateOpened && mr.sourceBranch == ref {
			of = mr
			break
		}
	}
	pl := s.startPipeline(p, pipelineSpec{sha: sha, ref: ref, source: "api", branchOf: of, user: rc.user, ignoreSkip: true})
	rc.writeJSON(http.StatusCreated, s.pipelineJSON(pl, true))
}

// listPipelines serves GET /projects/:id/pipelines (ref, sha, status,
// source filters; newest first, sort=asc for oldest first).
func (s *Server) listPipelines(rc *reqCtx) {
	p := s.project(rc)
	if p == nil {
		return
	}
	items := []any{}
	asc := rc.get("sort") == "asc"
	for i := range p.pipelines {
		pl := p.pipelines[len(p.pipelines)-1-i]
		if asc {
			pl = p.pipelines[i]
		}
		if f := rc.get("ref"); f != "" && pl.ref != f {
			continue
		}
		if f := rc.get("sha"); f != "" && pl.sha != f {
			continue
		}
		if f := rc.get("status"); f != "" && pl.status != f {
			continue
		}
		if f := rc.get("source"); f != "" && pl.source != f {
			continue
		}
		items = append(items, s.pipelineJSON(pl, false))
	}
	rc.paginate(items)
}

// getPipeline serves GET /projects/:id/pipelines/:pipeline_id.
func (s *Server) getPipeline(rc *reqCtx) {
	p := s.project(rc)
	if p == nil {
		return
	}
	id, _ := strconv.ParseInt(rc.params["pipeline_id"], 10, 64)
	for _, pl := range p.pipelines {
		if pl.id == id {
			rc.writeJSON(http.StatusOK, s.pipelineJSON(pl, true))
			return
		}
	}
	rc.fail(http.StatusNotFound, "404 Not found")
}

// playJob serves POST /projects/:id/jobs/:job_id/play (doc/api/jobs.md
// "Run a job"): a person plays the manual job of a pipeline waiting in
// "manual"; the pipeline runs and ends in "success" after
// PipelineScript.Duration, with a Pipeline Hook at each change. Any other
// job answers 400 "Unplayable Job".
func (s *Server) playJob(rc *reqCtx) {
	p := s.project(rc)
	if p == nil || !rc.requireAccess(p, AccessDeveloper) {
		return
	}
	id, _ := strconv.ParseInt(rc.params["job_id"], 10, 64)
	for _, pl := range p.pipelines {
		if pl.jobID != id {
			continue
		}
		if pl.status != "manual" {
			rc.fail(http.StatusBadRequest, "Unplayable Job")
			return
		}
		pl.status, pl.updated = "running", s.now()
		s.emitPipelineHook(pl)
		s.schedule(p.script.Duration, func() {
			pl.status, pl.finished, pl.updated = "success", s.now(), s.now()
			s.emitPipelineHook(pl)
		})
		rc.writeJSON(http.StatusOK, map[string]any{"id": pl.jobID, "name": "test", "stage": "test", "status": "pending",
			"pipeline": map[string]any{"id": pl.id, "sha": pl.sha, "ref": pl.ref, "status": pl.status}})
		return
	}
	rc.fail(http.StatusNotFound, "404 Job Not Found")
}

// MRPipelineCount is how many pipelines the project has run for merge
// requests: merge request pipelines (source merge_request_event: one per
// push to a merge request's source branch, rebase or pipeline created
// through the merge request API) and pipelines of a merge request's
// source branch created through POST /projects/:id/pipeline. A pipeline
// skipped by its commit's [skip ci] ran nothing and is not counted
// (SkippedPipelineCount).
func (s *Server) MRPipelineCount(projectID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projects[projectID]
	if p == nil {
		return 0
	}
	n := 0
	for _, pl := range p.pipelines {
		if (pl.mr != nil || pl.branchOf != nil) && pl.status != "skipped" {
			n++
		}
	}
	return n
}
