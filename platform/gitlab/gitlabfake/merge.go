package gitlabfake

import (
	"fmt"
	"net/http"
	"time"
)

// RebaseBehavior scripts how PUT .../rebase of one MR ends.
type RebaseBehavior struct {
	// Conflict makes the rebase fail: merge_error "Rebase failed. Please
	// rebase locally", has_conflicts true, detailed_merge_status
	// "conflict" until the source branch gets a new head.
	Conflict bool
	// Duration is how long rebase_in_progress stays true (0: finishes
	// asynchronously right away).
	Duration time.Duration
	// StuckForever keeps rebase_in_progress true for good.
	StuckForever bool
}

// MergeBlock scripts why GitLab will not merge one MR, for the failure
// paths of a merge (GITLAB-FACTS §2.4, §2.6). The zero value blocks nothing.
type MergeBlock struct {
	// DetailedMergeStatus, when set, replaces the computed
	// detailed_merge_status of an open MR in every answer, for example
	// "checking", "approvals_syncing", "requested_changes" or
	// "discussions_not_resolved"; the merge answers 405 unless it is
	// "mergeable".
	DetailedMergeStatus string
	// Draft marks the MR as a draft: "draft" and "work_in_progress" true and,
	// unless DetailedMergeStatus is set, detailed_merge_status
	// "draft_status" (so the merge answers 405).
	Draft bool
	// Rule is a project rule the merge service enforces after the API's
	// checks passed (a push rule, a compliance merge check): the merge does
	// not happen, merge_error becomes Rule, and the call is answered with
	// RuleStatus: 422 "Branch cannot be merged" as newer GitLab does (the
	// default), or 200 with the still-open MR as older GitLab did.
	Rule       string
	RuleStatus int
}

// SetMergeBlock sets (or, with the zero value, clears) what blocks the
// merge of MR !iid. See MergeBlock.
func (s *Server) SetMergeBlock(projectID, iid int64, b MergeBlock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.projects[projectID]; p != nil && p.mrs[iid] != nil {
		p.mrs[iid].block = b
	}
}

// FinishRebase ends the running rebase of MR !iid now, as its
// RebaseBehavior says (a conflict or a new head), even one started with
// StuckForever. It does nothing when no rebase runs.
func (s *Server) FinishRebase(projectID, iid int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.projects[projectID]; p != nil && p.mrs[iid] != nil && p.mrs[iid].rebaseInProgress {
		mr := p.mrs[iid]
		s.finishRebase(mr, mr.rebaseBy)
	}
}

// rebaseLockMessage is MergeRequest::REBASE_LOCK_MESSAGE, answered with 409
// when a rebase is requested while one runs or on an MR that is not open
// (rebase_async raises StaleObjectError, turned into RebaseLockTimeout).
const rebaseLockMessage = "Failed to enqueue the rebase operation, possibly due to a long-lived transaction. Try again later."

// SetRebaseBehavior scripts the next rebases of MR !iid.
func (s *Server) SetRebaseBehavior(projectID, iid int64, b RebaseBehavior) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.projects[projectID]; p != nil && p.mrs[iid] != nil {
		p.mrs[iid].rebase = b
	}
}

// SetMergeDuration makes every merge in the project take d, as a merge
// GitLab runs in MergeService while the API call waits: a merge call that
// passes the checks locks the MR (state "locked", detailed_merge_status
// "not_open") and is answered d later, when the merge takes effect (merge
// commit, hook, deploy pipeline) and the MR shows "merged". The merge goes
// through even when the caller gave up waiting, as GitLab's does. Meanwhile
// a second merge call, from any user, answers 405 "405 Method Not Allowed"
// (a locked MR is not mergeable; GITLAB-FACTS §2.6) and GET shows the MR
// locked. Zero (the default) merges at once.
func (s *Server) SetMergeDuration(projectID int64, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.projects[projectID]; p != nil {
		p.mergeTime = d
	}
}

// merge serves PUT /projects/:id/merge_requests/:iid/merge in GitLab's order
// (GITLAB-FACTS §2.6): 401 "401 Unauthorized" below
// ProjectSpec.MergeAccessLevel; 409 "SHA does not match HEAD of source
// branch: <head>" when sha is given and differs; 405 "405 Method Not
// Allowed" unless detailed_merge_status is "mergeable" and no rebase runs
// (closed, merged and locked MRs included). Otherwise it merges, after
// SetMergeDuration with the MR locked meanwhile (merge commit,
// or fast-forward for merge method ff; squash commit when squashing), emits
// the Merge Request Hook "merge", starts the deploy pipeline on a
// protected target, and answers 200 with the MR.
func (s *Server) merge(rc *reqCtx) {
	p, mr := s.mr(rc)
	if mr == nil {
		return
	}
	if p.access(rc.user) < p.MergeAccessLevel {
		rc.fail(http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	if sha, ok := rc.str("sha"); ok && sha != "" && sha != mr.sha {
		rc.fail(http.StatusConflict, "SHA does not match HEAD of source branch: "+mr.sha)
		return
	}
	if mr.rebaseInProgress || s.detailedStatus(mr) != "mergeable" {
		rc.fail(http.StatusMethodNotAllowed, "405 Method Not Allowed")
		return
	}
	if mr.block.Rule != "" {
		mr.mergeError, mr.updated = mr.block.Rule, s.now()
		if mr.block.RuleStatus == http.StatusOK {
			rc.writeJSON(http.StatusOK, s.mrJSON(mr, rc.user, false))
			return
		}
		rc.fail(http.StatusUnprocessableEntity, "Branch cannot be merged")
		return
	}
	squash, given := rc.boolean("squash")
	squash = mr.squashOnMerge(squash, given)
	remove, given := rc.boolean("should_remove_source_branch")
	if !given {
		remove = mr.removeSource
	}
	if d := p.mergeTime; d > 0 {
		s.lockForMerge(mr, d)
	}
	s.doMerge(mr, rc.user, squash, remove, rc.get("merge_commit_message"))
	rc.writeJSON(http.StatusOK, s.mrJSON(mr, rc.user, false))
}

// lockForMerge locks mr for d while its merge runs (SetMergeDuration): it
// releases the server's lock meanwhile, so that other calls are served and
// see the MR locked, and counts as pending work for WaitIdle. Called and
// returns with s.mu held.
func (s *Server) lockForMerge(mr *mergeRequest, d time.Duration) {
	mr.state, mr.updated = stateLocked, s.now()
	s.pending++
	s.mu.Unlock()
	time.Sleep(d)
	s.mu.Lock()
	s.pending--
}

// squashOnMerge decides squashing from the merge call's squash parameter
// (when given), else the MR's squash flag or the project's default_on, and
// the project's always/never, which win.
func (mr *mergeRequest) squashOnMerge(param, given bool) bool {
	squash := param
	if !given {
		squash = mr.squash || mr.p.SquashOption == "default_on"
	}
	switch mr.p.SquashOption {
	case "always":
		return true
	case "never":
		return false
	}
	return squash
}

func (s *Server) doMerge(mr *mergeRequest, by *user, squash, removeSource bool, msg string) {
	p, r := mr.p, mr.p.repo
	target := r.branches[mr.targetBranch]
	head := mr.sha
	if squash {
		parent := r.mergeBase(head, target)
		if p.MergeMethod == "ff" {
			parent = target
		}
		sc := s.newCommit(p, []string{parent}, mr.title, r.commits[head].files, mr.author)
		mr.squashCommit, head = sc.id, sc.id
	}
	newTarget := head
	if p.MergeMethod != "ff" {
		if msg == "" {
			msg = fmt.Sprintf("Merge branch '%s' into '%s'\n\n%s\n\nSee merge request %s!%d",
				mr.sourceBranch, mr.targetBranch, mr.title, p.PathWithNamespace, mr.iid)
		}
		files := r.threeWay(r.mergeBase(head, target), head, target)
		mc := s.newCommit(p, []string{target, head}, msg, files, by)
		mr.mergeCommitSHA, newTarget = mc.id, mc.id
	}
	prev := mr.updated
	mr.state, mr.mergedBy, mr.mergedAt, mr.updated = stateMerged, by, s.now(), s.now()
	s.addSystemNote(mr, by, "merged")
	s.emitMRHook(mr, by, "merge", hookExtra{changes: map[string]any{
		"state_id":   change(4, 3), // opened -> locked -> merged, as GitLab reports it
		"updated_at": change(hookTime(prev), hookTime(mr.updated)),
	}})
	if removeSource {
		delete(r.branches, mr.sourceBranch)
	}
	s.moveBranch(p, mr.targetBranch, newTarget, by)
}

// rebase serves PUT .../rebase: 202 {"rebase_in_progress": true}; 403
// "403 Forbidden - Cannot push to source branch" below Developer, "403
// Forbidden - Source branch does not exist"; 409 with rebaseLockMessage
// while a rebase runs or when the MR is not open. The rebase finishes after
// RebaseBehavior.Duration: a conflict sets merge_error, success moves the
// source branch onto the target (new head, new MR pipeline, Merge Request
// Hook "update" with oldrev). A branch already on top of the target is left
// as is. skip_ci is ignored.
func (s *Server) rebase(rc *reqCtx) {
	p, mr := s.mr(rc)
	if mr == nil {
		return
	}
	if p.access(rc.user) < AccessDeveloper {
		rc.fail(http.StatusForbidden, "403 Forbidden - Cannot push to source branch")
		return
	}
	if _, ok := p.repo.branches[mr.sourceBranch]; !ok {
		rc.fail(http.StatusForbidden, "403 Forbidden - Source branch does not exist")
		return
	}
	if !s.startRebase(mr, rc.user) {
		rc.fail(http.StatusConflict, rebaseLockMessage)
		return
	}
	rc.writeJSON(http.StatusAccepted, map[string]any{"rebase_in_progress": true})
}

// startRebase marks the rebase running and schedules its end; false when
// the MR is not open or a rebase already runs.
func (s *Server) startRebase(mr *mergeRequest, by *user) bool {
	if mr.state != stateOpened || mr.rebaseInProgress {
		return false
	}
	mr.rebaseInProgress, mr.mergeError, mr.rebaseBy = true, "", by
	if !mr.rebase.StuckForever {
		s.schedule(mr.rebase.Duration, func() {
			if mr.rebaseInProgress { // not ended early by FinishRebase
				s.finishRebase(mr, by)
			}
		})
	}
	return true
}

func (s *Server) finishRebase(mr *mergeRequest, by *user) {
	mr.rebaseInProgress = false
	if mr.state != stateOpened {
		return
	}
	p, r := mr.p, mr.p.repo
	if mr.rebase.Conflict {
		mr.mergeError, mr.hasConflicts, mr.updated = "Rebase failed. Please rebase locally", true, s.now()
		return
	}
	mr.mergeError, mr.hasConflicts = "", false
	source, ok := r.branches[mr.sourceBranch]
	target, ok2 := r.branches[mr.targetBranch]
	if !ok || !ok2 || r.isAncestor(target, source) {
		return
	}
	files := r.threeWay(r.mergeBase(source, target), source, target)
	c := s.newCommit(p, []string{target}, r.commits[source].message, files, r.commits[source].author)
	s.moveBranch(p, mr.sourceBranch, c.id, by)
}

// SetMRLocked puts open MR !iid of the project in GitLab's "locked" state
// (locked true), as GitLab shows it while a merge it runs is in progress,
// for as long as a test needs (SetMergeDuration locks it only during a
// merge call, on the wall clock); locked false puts a locked MR back to
// "opened", as GitLab does when the merge fails. An MR in another state is
// left as it is.
func (s *Server) SetMRLocked(projectID, iid int64, locked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projects[projectID]
	if p == nil || p.mrs[iid] == nil {
		return
	}
	mr := p.mrs[iid]
	switch {
	case locked && mr.state == stateOpened:
		mr.state, mr.updated = stateLocked, s.now()
	case !locked && mr.state == stateLocked:
		mr.state, mr.updated = stateOpened, s.now()
	}
}

// SetMergeMethod changes the project's merge_method (merge, rebase_merge
// or ff), as PUT /projects/:id with merge_method does
// (doc/api/projects.md "Edit a project"); merge requests opened before
// follow it from then on.
func (s *Server) SetMergeMethod(projectID int64, method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.projects[projectID]; p != nil {
		p.MergeMethod = method
	}
}
