package gitlabfake

import (
	"fmt"
	"net/http"
	"time"
)

// Merge trains (ProjectSpec.MergeTrains), after GitLab's
// doc/ci/pipelines/merge_trains.md and doc/api/merge_trains.md: a merge
// request added to the train of its target branch gets a train pipeline
// (ref refs/merge-requests/<iid>/train, outcome from PipelineScript.MR)
// on the target as the cars ahead of it will leave it; a car merges once
// its pipeline passed and every car ahead merged. A car whose pipeline
// fails is removed from the train (the merge request stays open, with a
// system note) and the cars behind it run their pipelines again without
// it. Cars are merged as GitLab merges the train ref: the change on top of
// the target (fast-forward under merge method ff, else a merge commit), so
// no rebase is asked of anyone.

// trainCar is one merge request on a merge train.
type trainCar struct {
	id       int64
	mr       *mergeRequest
	user     *user
	pipeline *pipeline
	status   string // idle, fresh, merged (GitLab's car states)
	passed   bool
	squash   bool
	created  time.Time
	updated  time.Time
	mergedAt time.Time
}

// addToTrain serves POST /projects/:id/merge_trains/merge_requests/:iid
// (sha, squash, auto_merge): 403 "403 Forbidden" without merge trains;
// 401 below the merge access level; 409 "SHA does not match HEAD of
// source branch: <head>" for another sha; 400 when the merge request is
// not open, already on a train, conflicts, or its head pipeline has not
// passed ("Unable to add to merge train"); else 201 with the train's cars.
func (s *Server) addToTrain(rc *reqCtx) {
	p, mr := s.mr(rc)
	if mr == nil {
		return
	}
	switch {
	case !p.MergeTrains:
		rc.fail(http.StatusForbidden, "403 Forbidden")
		return
	case p.access(rc.user) < p.MergeAccessLevel:
		rc.fail(http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	if sha, ok := rc.str("sha"); ok && sha != "" && sha != mr.sha {
		rc.fail(http.StatusConflict, "SHA does not match HEAD of source branch: "+mr.sha)
		return
	}
	if c := p.cars[mr.iid]; c != nil && c.status != "merged" {
		rc.fail(http.StatusBadRequest, "Unable to add to merge train: the merge request is already on a merge train")
		return
	}
	hp := s.headPipeline(mr)
	if mr.state != stateOpened || mr.hasConflicts || hp == nil || hp.status != "success" {
		rc.fail(http.StatusBadRequest, "Unable to add to merge train")
		return
	}
	squash, given := rc.boolean("squash")
	s.ids.car++
	now := s.now()
	c := &trainCar{id: s.ids.car, mr: mr, user: rc.user, status: "idle", squash: mr.squashOnMerge(squash, given), created: now, updated: now}
	if p.trains == nil {
		p.trains, p.cars = map[string][]*trainCar{}, map[int64]*trainCar{}
	}
	p.trains[mr.targetBranch] = append(p.trains[mr.targetBranch], c)
	p.cars[mr.iid] = c
	s.addSystemNote(mr, rc.user, "started a merge train")
	s.startCar(c)
	train := p.trains[mr.targetBranch]
	out := make([]map[string]any, len(train))
	for i, car := range train {
		out[i] = s.carJSON(car)
	}
	rc.writeJSON(http.StatusCreated, out)
}

// getTrainCar serves GET /projects/:id/merge_trains/merge_requests/:iid:
// the car of the merge request, merged ones included; 404 "404 Merge
// Train Not Found" when it is on no train (never added, or removed).
func (s *Server) getTrainCar(rc *reqCtx) {
	p, mr := s.mr(rc)
	if mr == nil {
		return
	}
	c := p.cars[mr.iid]
	if c == nil {
		rc.fail(http.StatusNotFound, "404 Merge Train Not Found")
		return
	}
	rc.writeJSON(http.StatusOK, s.carJSON(c))
}

// startCar runs the car's train pipeline.
func (s *Server) startCar(c *trainCar) {
	pl := s.startPipeline(c.mr.p, pipelineSpec{sha: c.mr.sha, ref: fmt.Sprintf("refs/merge-requests/%d/train", c.mr.iid),
		source: "merge_request_event", mr: c.mr, user: c.user})
	c.pipeline, c.status, c.passed, c.updated = pl, "fresh", false, s.now()
	pl.onFinish = func(pl *pipeline) {
		if c.pipeline != pl || c.status == "merged" {
			return // an earlier run, restarted since
		}
		if pl.status == "success" {
			c.passed = true
		} else {
			s.dropCar(c)
		}
		s.advanceTrain(c.mr.p, c.mr.targetBranch)
	}
}

// dropCar removes a failed car from its train: the merge request stays
// open; the cars behind it run their pipelines again without it.
func (s *Server) dropCar(c *trainCar) {
	p := c.mr.p
	train := p.trains[c.mr.targetBranch]
	for i, car := range train {
		if car != c {
			continue
		}
		p.trains[c.mr.targetBranch] = append(train[:i:i], train[i+1:]...)
		delete(p.cars, c.mr.iid)
		s.addSystemNote(c.mr, c.user, "removed this merge request from the merge train because the pipeline did not succeed")
		for _, behind := range p.trains[c.mr.targetBranch][i:] {
			s.startCar(behind)
		}
		return
	}
}

// advanceTrain merges the cars at the front of branch's train whose
// pipelines passed, in order.
func (s *Server) advanceTrain(p *project, branch string) {
	for {
		train := p.trains[branch]
		if len(train) == 0 || !train[0].passed {
			return
		}
		c := train[0]
		p.trains[branch] = train[1:]
		if c.mr.state != stateOpened {
			delete(p.cars, c.mr.iid)
			continue
		}
		s.mergeCar(c)
	}
}

// mergeCar merges a car as GitLab merges the train ref: the merge
// request's change on top of the target branch.
func (s *Server) mergeCar(c *trainCar) {
	mr, r := c.mr, c.mr.p.repo
	target := r.branches[mr.targetBranch]
	if !r.isAncestor(target, mr.sha) {
		files := r.threeWay(r.mergeBase(mr.sha, target), mr.sha, target)
		rebased := s.newCommit(mr.p, []string{target}, r.commits[mr.sha].message, files, r.commits[mr.sha].author)
		mr.sha = rebased.id
	}
	s.doMerge(mr, c.user, c.squash, mr.removeSource, "")
	c.status, c.mergedAt, c.updated = "merged", s.now(), s.now()
}

func (s *Server) carJSON(c *trainCar) map[string]any {
	mr := c.mr
	var pl, merged any
	if c.pipeline != nil {
		pl = s.pipelineJSON(c.pipeline, false)
	}
	if !c.mergedAt.IsZero() {
		merged = c.mergedAt.UTC().Format(time.RFC3339Nano)
	}
	return map[string]any{
		"id": c.id,
		"merge_request": map[string]any{"id": mr.id, "iid": mr.iid, "project_id": mr.p.id, "title": mr.title,
			"description": mr.description, "state": mr.state, "created_at": mr.created.UTC().Format(time.RFC3339Nano),
			"updated_at": mr.updated.UTC().Format(time.RFC3339Nano), "web_url": s.mrURL(mr)},
		"user": s.userBasic(c.user), "pipeline": pl,
		"created_at": c.created.UTC().Format(time.RFC3339Nano), "updated_at": c.updated.UTC().Format(time.RFC3339Nano),
		"target_branch": mr.targetBranch, "status": c.status, "merged_at": merged,
		"duration": int(s.now().Sub(c.created).Seconds()),
	}
}
