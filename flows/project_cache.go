package flows

import (
	"context"
	"fmt"
	"sync"
	"time"

	"changebot/platform"
)

// projectReadTTL is how long a project GitLab answered for is taken as
// it was without asking again: the create step of a change submitted (and
// so checked against GitLab) less than this ago, or of another change of
// the project read since, uses that answer (issue 12 point 3). What it may
// miss in that time: a squash option changed since applies to the MRs
// opened after it; a project gone since fails the create's first write.
const projectReadTTL = time.Minute

// projectReads keeps the engine's recent successful reads of projects (by
// the path or id a change names), each for projectReadTTL on the engine's
// clock: one entry per project, never per change; failures are not kept.
type projectReads struct {
	mu       sync.Mutex
	projects map[string]cachedProject
	// branches holds when a target branch was last seen to exist, by
	// "<project id>/<branch>" (a submit's check, issue 22 point 1).
	branches map[string]time.Time
	// queues holds whether a target branch requires a merge queue (a
	// GitHub branch rule), by "<project id>/<branch>".
	queues map[string]cachedQueue
}

type cachedQueue struct {
	on bool
	at time.Time
}

type cachedProject struct {
	p  platform.Project
	at time.Time
}

// project returns project as GitLab answered within projectReadTTL, or
// reads it (GET /projects/:id) and keeps a successful answer.
func (e *Engine) project(ctx context.Context, project string) (platform.Project, error) {
	r := &e.reads
	r.mu.Lock()
	c, ok := r.projects[project]
	r.mu.Unlock()
	if ok && e.now().Sub(c.at) < projectReadTTL {
		return c.p, nil
	}
	p, err := e.gl.Project(ctx, project)
	if err != nil {
		return p, err
	}
	e.rememberProject(project, p)
	return p, nil
}

// rememberProject keeps p, GitLab's answer for project just now.
func (e *Engine) rememberProject(project string, p platform.Project) {
	r := &e.reads
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.projects == nil {
		r.projects = map[string]cachedProject{}
	}
	r.projects[project] = cachedProject{p: p, at: e.now()}
}

// branchExists reports (nil) whether branch exists in projectID as GitLab
// answered within projectReadTTL, or reads it (GET
// repository/branches/:branch) and keeps a successful answer: a burst of
// submits to one branch shares one read. The read's error is returned as
// it is (platform.ErrNotFound for a missing branch, never kept).
func (e *Engine) branchExists(ctx context.Context, projectID int64, branch string) error {
	key := fmt.Sprintf("%d/%s", projectID, branch)
	r := &e.reads
	r.mu.Lock()
	at, ok := r.branches[key]
	r.mu.Unlock()
	if ok && e.now().Sub(at) < projectReadTTL {
		return nil
	}
	if _, err := e.gl.Branch(ctx, projectID, branch); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.branches == nil {
		r.branches = map[string]time.Time{}
	}
	r.branches[key] = e.now()
	return nil
}

// mergeQueue reports whether branch of projectID requires a merge queue
// as the platform answered within projectReadTTL, or reads it once
// (mq.MergeQueue) and keeps a successful answer: every change of the
// branch, and every poll of theirs, shares one read per projectReadTTL.
func (e *Engine) mergeQueue(ctx context.Context, mq branchMergeQueues, projectID int64, branch string) (bool, error) {
	key := fmt.Sprintf("%d/%s", projectID, branch)
	r := &e.reads
	r.mu.Lock()
	c, ok := r.queues[key]
	r.mu.Unlock()
	if ok && e.now().Sub(c.at) < projectReadTTL {
		return c.on, nil
	}
	on, err := mq.MergeQueue(ctx, projectID, branch)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queues == nil {
		r.queues = map[string]cachedQueue{}
	}
	r.queues[key] = cachedQueue{on: on, at: e.now()}
	return on, nil
}
