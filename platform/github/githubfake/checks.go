package githubfake

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// CIScript scripts the checks of a repository: every pushed head of an
// open pull request, every new pull request's head and every new tip of
// the default branch gets one GitHub Actions workflow run.
type CIScript struct {
	// Jobs are the check run names of the run; default ["build"].
	Jobs []string
	// Statuses are commit status contexts reported beside the check runs
	// (an external CI), with the same outcome.
	Statuses []string
	// Outcomes are the conclusions of successive runs and re-runs,
	// "success", "failure" or "cancelled"; the last repeats; default
	// success.
	Outcomes []string
	// MergeGroups, when set, are the conclusions of successive merge
	// group runs (SetMergeQueue), the last repeating, so a test fails a
	// group's checks and not the pull request's; empty means groups take
	// their outcome from Outcomes like every run.
	MergeGroups []string
}

type checkRun struct {
	id         int64
	name       string
	sha        string
	status     string // queued, in_progress, completed
	conclusion string
	app        string // app slug
	suite      int64
	started    time.Time
	completed  time.Time
}

type status struct {
	id      int64
	context string
	sha     string
	state   string // pending, success, failure, error
	url     string
	at      time.Time
}

type workflowRun struct {
	id, suite  int64
	sha        string
	branch     string
	status     string
	conclusion string
	attempt    int
	jobs       []*checkRun
	statuses   []string
	created    time.Time
	updated    time.Time
}

// SetCIScript replaces repository repoID's CI script.
func (s *Server) SetCIScript(repoID int64, script CIScript) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	r.ci, r.spec.NoCI = script, false
}

// SetCheckRun records a check run of another App (slug app) on sha with
// status and conclusion, as that App would report it, and emits its
// check_run webhook. A later call with the same name is the newer run.
func (s *Server) SetCheckRun(repoID int64, sha, name, app, status, conclusion string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	s.ids.check++
	s.ids.suite++
	cr := &checkRun{id: s.ids.check, name: name, sha: sha, status: status, conclusion: conclusion, app: app, suite: s.ids.suite, started: s.now().UTC()}
	if status == "completed" {
		cr.completed = s.now().UTC()
	}
	r.checks[sha] = append(r.checks[sha], cr)
	s.touchPulls(r, sha)
	s.emitCheckRun(r, cr)
}

// SetStatus records a commit status of sha (as POST .../statuses/{sha}
// would) and emits its status webhook.
func (s *Server) SetStatus(repoID int64, sha, context, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addStatus(s.repos[repoID], sha, context, state)
}

func (s *Server) addStatus(r *repo, sha, context, state string) *status {
	s.ids.check++
	st := &status{id: s.ids.check, context: context, sha: sha, state: state, url: s.URL() + "/ci/" + strconv.FormatInt(s.ids.check, 10), at: s.now().UTC()}
	r.statuses[sha] = append(r.statuses[sha], st)
	s.touchPulls(r, sha)
	s.emitStatus(r, st)
	return st
}

// touchPulls makes the mergeability of pull requests with head sha
// unknown again.
func (s *Server) touchPulls(r *repo, sha string) {
	for _, pr := range r.pulls {
		if pr.state == "open" && s.headOf(r, pr) == sha {
			pr.mergeableKnown = false
		}
	}
}

// nextOutcomeOf consumes the script's next outcome for run: a merge
// group's from MergeGroups when set, else nextOutcome.
func (r *repo) nextOutcomeOf(run *workflowRun) string {
	if n := len(r.ci.MergeGroups); n > 0 && strings.HasPrefix(run.branch, queueBranchPrefix) {
		o := r.ci.MergeGroups[min(r.groupCount, n-1)]
		r.groupCount++
		return o
	}
	return r.nextOutcome()
}

// nextOutcome consumes the script's next outcome.
func (r *repo) nextOutcome() string {
	o := "success"
	if n := len(r.ci.Outcomes); n > 0 {
		o = r.ci.Outcomes[min(r.ciCount, n-1)]
	}
	r.ciCount++
	return o
}

// startCI starts the scripted workflow run of sha (once per sha).
func (s *Server) startCI(r *repo, sha, branch string) {
	if r.spec.NoCI {
		return
	}
	for _, run := range r.runs {
		if run.sha == sha {
			return
		}
	}
	jobs := r.ci.Jobs
	if len(jobs) == 0 {
		jobs = []string{"build"}
	}
	s.ids.run++
	s.ids.suite++
	now := s.now().UTC()
	run := &workflowRun{id: s.ids.run, suite: s.ids.suite, sha: sha, branch: branch, status: "in_progress", attempt: 1, statuses: r.ci.Statuses, created: now, updated: now}
	r.runs[run.id] = run
	for _, j := range jobs {
		run.jobs = append(run.jobs, s.newJob(r, run, j))
	}
	for _, ctx := range run.statuses {
		s.addStatus(r, sha, ctx, "pending")
	}
	s.emitWorkflowRun(r, run, "requested")
	s.finishLater(r, run, run.jobs)
}

func (s *Server) newJob(r *repo, run *workflowRun, name string) *checkRun {
	s.ids.check++
	cr := &checkRun{id: s.ids.check, name: name, sha: run.sha, status: "in_progress", app: "github-actions", suite: run.suite, started: s.now().UTC()}
	r.checks[run.sha] = append(r.checks[run.sha], cr)
	s.touchPulls(r, run.sha)
	return cr
}

// finishLater completes jobs after Options.CIDuration with the script's
// next outcome.
func (s *Server) finishLater(r *repo, run *workflowRun, jobs []*checkRun) {
	s.schedule(s.opts.CIDuration, func() {
		outcome := r.nextOutcomeOf(run)
		for _, j := range jobs {
			j.status, j.conclusion, j.completed = "completed", outcome, s.now().UTC()
			s.emitCheckRun(r, j)
		}
		state := map[string]string{"success": "success", "failure": "failure"}[outcome]
		if state == "" {
			state = "error"
		}
		for _, ctx := range run.statuses {
			s.addStatus(r, run.sha, ctx, state)
		}
		run.status, run.updated = "completed", s.now().UTC()
		run.conclusion = "success"
		for _, j := range run.jobs {
			if j.conclusion != "success" {
				run.conclusion = j.conclusion
			}
		}
		s.touchPulls(r, run.sha)
		s.emitCheckSuite(r, run)
		s.emitWorkflowRun(r, run, "completed")
		s.groupDone(r, run)
	})
}

// checkResult is a check's state in commit-status words: success, pending
// or failure.
func (c *checkRun) result() string {
	switch {
	case c.status != "completed":
		return "pending"
	case c.conclusion == "success" || c.conclusion == "neutral" || c.conclusion == "skipped":
		return "success"
	}
	return "failure"
}

func statusResult(state string) string {
	switch state {
	case "success", "pending":
		return state
	}
	return "failure"
}

// latestRuns are the newest check run per name of sha.
func (r *repo) latestRuns(sha string) []*checkRun {
	idx := map[string]int{}
	var out []*checkRun
	for _, c := range r.checks[sha] {
		if i, ok := idx[c.name]; ok {
			out[i] = c
			continue
		}
		idx[c.name] = len(out)
		out = append(out, c)
	}
	return out
}

// latestStatuses are the newest status per context of sha.
func (r *repo) latestStatuses(sha string) []*status {
	idx := map[string]int{}
	var out []*status
	for _, st := range r.statuses[sha] {
		if i, ok := idx[st.context]; ok {
			out[i] = st
			continue
		}
		idx[st.context] = len(out)
		out = append(out, st)
	}
	return out
}

// checkState is the state of the check run or status named ctx on sha.
func (s *Server) checkState(r *repo, sha, ctx string) (string, bool) {
	for _, c := range r.latestRuns(sha) {
		if c.name == ctx {
			return c.result(), true
		}
	}
	for _, st := range r.latestStatuses(sha) {
		if st.context == ctx {
			return statusResult(st.state), true
		}
	}
	return "", false
}

// latestChecks are the states of every latest check and status of sha.
func (s *Server) latestChecks(r *repo, sha string) []string {
	var out []string
	for _, c := range r.latestRuns(sha) {
		out = append(out, c.result())
	}
	for _, st := range r.latestStatuses(sha) {
		out = append(out, statusResult(st.state))
	}
	return out
}

// listCheckRuns answers GET .../commits/{ref}/check-runs (fixture
// api-checks-list-for-ref.json), newest first; filter=latest (the default)
// keeps the newest run per name. It is paged (per_page, default 30, at
// most 100, Link header) and total_count counts every run (docs.github.com
// "List check runs for a Git reference").
func (s *Server) listCheckRuns(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	c := s.resolve(r, rc.param("ref"))
	if c == nil {
		rc.fail(http.StatusUnprocessableEntity, "No commit found for SHA: "+rc.param("ref"))
		return
	}
	runs := r.latestRuns(c.sha)
	if rc.query("filter") == "all" {
		runs = r.checks[c.sha]
	}
	out := []any{}
	for i := len(runs) - 1; i >= 0; i-- { // newest first
		out = append(out, s.checkRunJSON(r, runs[i]))
	}
	rc.json(http.StatusOK, map[string]any{"total_count": len(out), "check_runs": paginate(rc, out, 30)})
}

// suites lists the check suites of sha: one per workflow run and one per
// other App's run.
func (s *Server) suites(r *repo, sha string) []map[string]any {
	seen := map[int64]bool{}
	var out []map[string]any
	for _, c := range r.checks[sha] {
		if seen[c.suite] {
			continue
		}
		seen[c.suite] = true
		status, conclusion := "completed", "success"
		for _, x := range r.checks[sha] {
			if x.suite != c.suite {
				continue
			}
			if x.status != "completed" {
				status = x.status
			} else if x.conclusion != "success" && x.conclusion != "neutral" && x.conclusion != "skipped" {
				conclusion = x.conclusion
			}
		}
		var concl any = conclusion
		if status != "completed" {
			concl = nil
		}
		out = append(out, map[string]any{"id": c.suite, "head_sha": sha, "status": status, "conclusion": concl,
			"app": map[string]any{"slug": c.app, "id": 1, "name": c.app}, "url": s.repoAPI(r) + "/check-suites/" + strconv.FormatInt(c.suite, 10)})
	}
	return out
}

func (s *Server) listCheckSuites(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	c := s.resolve(r, rc.param("ref"))
	if c == nil {
		rc.fail(http.StatusUnprocessableEntity, "No commit found for SHA: "+rc.param("ref"))
		return
	}
	suites := s.suites(r, c.sha)
	rc.json(http.StatusOK, map[string]any{"total_count": len(suites), "check_suites": append([]map[string]any{}, paginate(rc, suites, 30)...)})
}

// rerequestSuite answers POST .../check-suites/{id}/rerequest: the
// suite's runs of another App are queued again and complete with the
// script's next outcome; a GitHub Actions suite answers 403 (its App is
// not the caller).
func (s *Server) rerequestSuite(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil || !rc.canWrite(r) {
		return
	}
	id := rc.intParam("id")
	var runs []*checkRun
	for _, list := range r.checks {
		for _, c := range list {
			if c.suite == id {
				runs = append(runs, c)
			}
		}
	}
	if len(runs) == 0 {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	if runs[0].app == "github-actions" {
		rc.fail(http.StatusForbidden, "Resource not accessible by integration")
		return
	}
	run := &workflowRun{sha: runs[0].sha, suite: id}
	var again []*checkRun
	for _, c := range runs {
		s.ids.check++
		n := &checkRun{id: s.ids.check, name: c.name, sha: c.sha, status: "queued", app: c.app, suite: id, started: s.now().UTC()}
		r.checks[c.sha] = append(r.checks[c.sha], n)
		again = append(again, n)
	}
	run.jobs = again
	s.touchPulls(r, run.sha)
	s.schedule(s.opts.CIDuration, func() {
		outcome := r.nextOutcome()
		for _, j := range again {
			j.status, j.conclusion, j.completed = "completed", outcome, s.now().UTC()
			s.emitCheckRun(r, j)
		}
		s.touchPulls(r, run.sha)
	})
	rc.json(http.StatusCreated, map[string]any{})
}

// getCombinedStatus answers GET .../commits/{ref}/status (fixtures
// api-repos-combined-status.json, api-real-combined-status.exchange.json):
// the newest status per context and the combined state of them all; the
// statuses are paged (per_page, default 30, at most 100) and total_count
// counts them all (docs.github.com "Get the combined status for a specific
// reference").
func (s *Server) getCombinedStatus(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	c := s.resolve(r, rc.param("ref"))
	if c == nil {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	sts := r.latestStatuses(c.sha)
	state := "success"
	if len(sts) == 0 {
		state = "pending"
	}
	list := []any{}
	for _, st := range sts {
		switch {
		case st.state == "failure" || st.state == "error":
			state = "failure"
		case st.state == "pending" && state != "failure":
			state = "pending"
		}
		list = append(list, s.statusJSON(r, st))
	}
	rc.json(http.StatusOK, map[string]any{
		"state": state, "statuses": append([]any{}, paginate(rc, list, 30)...), "sha": c.sha, "total_count": len(list),
		"repository": s.repoJSON(r), "commit_url": s.repoAPI(r) + "/commits/" + c.sha, "url": s.repoAPI(r) + "/commits/" + c.sha + "/status",
	})
}

// createStatus answers POST .../statuses/{sha}.
func (s *Server) createStatus(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil || !rc.canWrite(r) {
		return
	}
	sha := rc.param("sha")
	if s.objects.commits[sha] == nil {
		rc.fail(http.StatusUnprocessableEntity, "No commit found for SHA: "+sha)
		return
	}
	state := rc.str("state")
	switch state {
	case "pending", "success", "failure", "error":
	default:
		rc.invalid("Status", "state", "custom", "state is not included in the list")
		return
	}
	ctx := rc.str("context")
	if ctx == "" {
		ctx = "default"
	}
	st := s.addStatus(r, sha, ctx, state)
	rc.json(http.StatusCreated, s.statusJSON(r, st))
}

// listWorkflowRuns answers GET .../actions/runs (fixture
// api-actions-list-workflow-runs.json), newest first, filtered by
// head_sha and branch.
func (s *Server) listWorkflowRuns(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	var runs []any
	for id := s.ids.run; id > 0; id-- {
		run := r.runs[id]
		if run == nil || (rc.query("head_sha") != "" && run.sha != rc.query("head_sha")) || (rc.query("branch") != "" && run.branch != rc.query("branch")) {
			continue
		}
		runs = append(runs, s.workflowRunJSON(r, run))
	}
	rc.json(http.StatusOK, map[string]any{"total_count": len(runs), "workflow_runs": append([]any{}, paginate(rc, runs, 30)...)})
}

// rerunFailedJobs answers POST .../actions/runs/{id}/rerun-failed-jobs:
// the failed or cancelled jobs of a completed run get new check runs
// (new, larger ids), completing with the script's next outcome.
func (s *Server) rerunFailedJobs(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil || !rc.canWrite(r) {
		return
	}
	run := r.runs[rc.intParam("id")]
	if run == nil {
		rc.fail(http.StatusNotFound, "Not Found")
		return
	}
	if run.status != "completed" {
		rc.fail(http.StatusForbidden, "This workflow is already running")
		return
	}
	var again []*checkRun
	for i, j := range run.jobs {
		if j.result() == "failure" {
			n := s.newJob(r, run, j.name)
			run.jobs[i] = n
			again = append(again, n)
		}
	}
	if len(again) == 0 {
		rc.fail(http.StatusForbidden, "This workflow run has no failed jobs")
		return
	}
	run.status, run.conclusion, run.attempt, run.updated = "in_progress", "", run.attempt+1, s.now().UTC()
	for _, ctx := range run.statuses {
		s.addStatus(r, run.sha, ctx, "pending")
	}
	s.emitWorkflowRun(r, run, "requested")
	s.finishLater(r, run, again)
	rc.json(http.StatusCreated, map[string]any{})
}

// WorkflowRunCount is how many workflow runs the repository has started
// (one per pushed head sha of a branch, and each re-run through the API):
// the "pipelines" a benchmark counts.
func (s *Server) WorkflowRunCount(repoID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	if r == nil {
		return 0
	}
	return len(r.runs)
}
