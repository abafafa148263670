package flows

import (
	"context"
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
