package gitlabfake

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MR states (doc/api/merge_requests.md) and their state_id in hooks.
const (
	stateOpened = "opened"
	stateClosed = "closed"
	stateMerged = "merged"
	// stateLocked is an MR GitLab is merging right now: MergeService locks
	// it (state_id 4) until the merge commit is on the target branch.
	stateLocked = "locked"
)

var stateIDs = map[string]int{stateOpened: 1, stateClosed: 2, stateMerged: 3, stateLocked: 4}

type mergeRequest struct {
	id, iid                      int64
	p                            *project
	title, description           string
	state                        string
	sourceBranch, targetBranch   string
	author                       *user
	sha                          string // diff head sha
	startSHA                     string // target head when the head was last set
	mergeCommitSHA, squashCommit string
	mergeError                   string
	hasConflicts                 bool
	removeSource, squash         bool
	approvals                    []*user
	notes                        []*note
	rebase                       RebaseBehavior
	rebaseInProgress             bool
	rebaseBy                     *user
	block                        MergeBlock
	mergedBy, closedBy, editedBy *user
	created, updated             time.Time
	mergedAt, closedAt, editedAt time.Time
	labels                       []string // titles, in the order added
	reviewers                    []*user  // RequestReviewAsUser
}

// MRSnapshot is the state of a merge request for assertions
// (Server.MergeRequest).
type MRSnapshot struct {
	ID, IID                    int64
	Title, Description         string
	SourceBranch, TargetBranch string
	// State is opened, closed or merged.
	State string
	// SHA is the head sha of the source branch.
	SHA string
	// Approvals are the usernames that approved, in order.
	Approvals []string
	// Notes are all notes, system notes included, oldest first.
	Notes []Note
	// MergeCommitSHA is set once merged with a merge commit ("" for
	// fast-forward merges); SquashCommitSHA once squashed.
	MergeCommitSHA, SquashCommitSHA string
	// DetailedMergeStatus as GET MR would answer now.
	DetailedMergeStatus string
	RebaseInProgress    bool
	MergeError          string
	// HeadPipelineID and HeadPipelineStatus describe the head pipeline (0
	// and "" when there is none).
	HeadPipelineID     int64
	HeadPipelineStatus string
}

// MergeRequest returns a snapshot of MR !iid of the project.
func (s *Server) MergeRequest(projectID, iid int64) (MRSnapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projects[projectID]
	if p == nil || p.mrs[iid] == nil {
		return MRSnapshot{}, false
	}
	mr := p.mrs[iid]
	snap := MRSnapshot{
		ID: mr.id, IID: mr.iid, Title: mr.title, Description: mr.description,
		SourceBranch: mr.sourceBranch, TargetBranch: mr.targetBranch, State: mr.state, SHA: mr.sha,
		MergeCommitSHA: mr.mergeCommitSHA, SquashCommitSHA: mr.squashCommit,
		DetailedMergeStatus: s.detailedStatus(mr), RebaseInProgress: mr.rebaseInProgress, MergeError: mr.mergeError,
	}
	for _, u := range mr.approvals {
		snap.Approvals = append(snap.Approvals, u.username)
	}
	for _, n := range mr.notes {
		snap.Notes = append(snap.Notes, n.export())
	}
	if hp := s.headPipeline(mr); hp != nil {
		snap.HeadPipelineID, snap.HeadPipelineStatus = hp.id, hp.status
	}
	return snap, true
}

func (p *project) sortedMRs() []*mergeRequest {
	out := slices.Collect(maps.Values(p.mrs))
	sortByID(out, func(m *mergeRequest) int64 { return m.iid }, false)
	return out
}

// mr resolves :id and :iid or answers 404.
func (s *Server) mr(rc *reqCtx) (*project, *mergeRequest) {
	p := s.project(rc)
	if p == nil {
		return nil, nil
	}
	iid, _ := strconv.ParseInt(rc.params["iid"], 10, 64)
	mr := p.mrs[iid]
	if mr == nil {
		rc.fail(http.StatusNotFound, "404 Not found")
		return nil, nil
	}
	return p, mr
}

// detailedStatus computes detailed_merge_status now, checking in the order
// not_open, conflict, need_rebase, ci_still_running / ci_must_pass,
// not_approved, mergeable.
func (s *Server) detailedStatus(mr *mergeRequest) string {
	if mr.state != stateOpened {
		return "not_open"
	}
	if mr.block.DetailedMergeStatus != "" {
		return mr.block.DetailedMergeStatus
	}
	if mr.block.Draft {
		return "draft_status"
	}
	if mr.hasConflicts {
		return "conflict"
	}
	if s.needsRebase(mr) {
		return "need_rebase"
	}
	if hp := s.headPipeline(mr); hp != nil {
		switch hp.status {
		case "created", "pending", "running":
			return "ci_still_running"
		case "failed", "canceled":
			return "ci_must_pass"
		}
	}
	if len(mr.approvals) < mr.p.ApprovalsRequired {
		return "not_approved"
	}
	return "mergeable"
}

// needsRebase: with ff or rebase_merge the target head must be an ancestor
// of the MR head.
func (s *Server) needsRebase(mr *mergeRequest) bool {
	p := mr.p
	if p.MergeMethod != "ff" && p.MergeMethod != "rebase_merge" {
		return false
	}
	target, ok := p.repo.branches[mr.targetBranch]
	return ok && !p.repo.isAncestor(target, mr.sha)
}

// The merge_status (and detailed_merge_status) of a merge request GitLab
// has not finished checking (doc/api/merge_requests.md "Merge status").
const (
	mergeChecking  = "checking"
	mergeUnchecked = "unchecked"
)

// mergeStatus is the deprecated merge_status.
func (s *Server) mergeStatus(mr *mergeRequest) string {
	if mr.hasConflicts {
		return "cannot_be_merged"
	}
	return "can_be_merged"
}

// createMR serves POST /projects/:id/merge_requests: 201 with the MR; 409
// {"message":["Another open merge request already exists for this source
// branch: !<iid>"]}; 422 for missing branches. It starts an MR pipeline and
// emits the Merge Request Hook "open".
func (s *Server) createMR(rc *reqCtx) {
	p := s.project(rc)
	if p == nil || !rc.requireAccess(p, AccessDeveloper) {
		return
	}
	for _, k := range []string{"source_branch", "target_branch", "title"} {
		if v, _ := rc.str(k); v == "" {
			rc.missing(k)
			return
		}
	}
	if !rc.withinLimits(mrLimits...) {
		return
	}
	src, tgt := rc.get("source_branch"), rc.get("target_branch")
	if src == tgt {
		rc.fail(http.StatusUnprocessableEntity, []string{"You can't use same project/branch for source and target"})
		return
	}
	for _, b := range []struct{ name, label string }{{src, "Source"}, {tgt, "Target"}} {
		if _, ok := p.repo.branches[b.name]; !ok {
			rc.fail(http.StatusUnprocessableEntity, []string{fmt.Sprintf("%s branch %q does not exist", b.label, b.name)})
			return
		}
	}
	for _, o := range p.sortedMRs() {
		if o.state == stateOpened && o.sourceBranch == src && o.targetBranch == tgt {
			rc.fail(http.StatusConflict, []string{fmt.Sprintf("Another open merge request already exists for this source branch: !%d", o.iid)})
			return
		}
	}
	remove, _ := rc.boolean("remove_source_branch")
	squash, _ := rc.boolean("squash")
	s.ids.mr++
	p.nextIID++
	now := s.now()
	mr := &mergeRequest{
		id: s.ids.mr, iid: p.nextIID, p: p, title: rc.get("title"), description: rc.get("description"),
		state: stateOpened, sourceBranch: src, targetBranch: tgt, author: rc.user,
		sha: p.repo.branches[src], startSHA: p.repo.branches[tgt], removeSource: remove, squash: squash,
		created: now, updated: now, labels: labelList(rc.get("labels")),
	}
	p.mrs[mr.iid] = mr
	s.mrByID[mr.id] = mr
	s.startMRPipeline(mr, rc.user)
	// As a real open on gitlab.com (fixture webhook-merge_request-open-gitlabcom.json):
	// mergeability is still being checked.
	s.emitMRHook(mr, rc.user, "open", hookExtra{computing: mergeChecking, changes: map[string]any{
		"merge_status": change("preparing", mergeChecking),
		"prepared_at":  change(nil, hookTime(now)),
		"updated_at":   change(hookTime(now), hookTime(now)),
	}})
	rc.writeJSON(http.StatusCreated, s.mrJSON(mr, rc.user, false))
}

// setMRHead records a new head sha (push, rebase): new MR pipeline, Merge
// Request Hook "update" with oldrev.
func (s *Server) setMRHead(p *project, mr *mergeRequest, sha string, by *user) {
	old, prevUpdated := mr.sha, mr.updated
	mr.sha = sha
	mr.startSHA = p.repo.branches[mr.targetBranch]
	mr.hasConflicts, mr.mergeError = false, ""
	mr.updated = s.now()
	if p.ResetApprovalsOnPush {
		mr.approvals = nil
	}
	s.addSystemNote(mr, by, "added 1 commit")
	s.startMRPipeline(mr, by)
	s.emitMRHook(mr, by, "update", hookExtra{oldrev: old, computing: mergeUnchecked, changes: map[string]any{
		"updated_at": change(hookTime(prevUpdated), hookTime(mr.updated)),
	}})
}

// listMRs serves GET /projects/:id/merge_requests (state, source_branch,
// target_branch, sort; newest first by default).
func (s *Server) listMRs(rc *reqCtx) {
	p := s.project(rc)
	if p == nil {
		return
	}
	state := cmpOr(rc.get("state"), "all")
	mrs := p.sortedMRs()
	sortByID(mrs, func(m *mergeRequest) int64 { return m.iid }, rc.get("sort") != "asc")
	items := []any{}
	for _, mr := range mrs {
		if (state != "all" && mr.state != state) ||
			(rc.get("source_branch") != "" && mr.sourceBranch != rc.get("source_branch")) ||
			(rc.get("target_branch") != "" && mr.targetBranch != rc.get("target_branch")) {
			continue
		}
		items = append(items, s.mrJSON(mr, rc.user, false))
	}
	rc.paginate(items)
}

// getMR serves GET /projects/:id/merge_requests/:iid (fixture
// api-mr-get.json); with include_rebase_in_progress=true it adds
// rebase_in_progress.
func (s *Server) getMR(rc *reqCtx) {
	_, mr := s.mr(rc)
	if mr == nil {
		return
	}
	withRebase, _ := rc.boolean("include_rebase_in_progress")
	rc.writeJSON(http.StatusOK, s.mrJSON(mr, rc.user, withRebase))
}

// updateMR serves PUT /projects/:id/merge_requests/:iid (state_event
// close|reopen, title, description, target_branch; doc/api/merge_requests.md
// "Update MR"), 200 with the MR. Close emits the Merge Request Hook
// "close", reopen "reopen", an edit "update" without oldrev whose changes
// name each field {previous, current}: a new target_branch as
// changes.target_branch (targetRefusal says when it is refused).
func (s *Server) updateMR(rc *reqCtx) {
	_, mr := s.mr(rc)
	if mr == nil || !rc.requireAccess(mr.p, AccessDeveloper) {
		return
	}
	event := rc.get("state_event")
	title, hasTitle := rc.str("title")
	desc, hasDesc := rc.str("description")
	target, hasTarget := rc.str("target_branch")
	addLabels, removeLabels := labelList(rc.get("add_labels")), labelList(rc.get("remove_labels"))
	if event == "" && !hasTitle && !hasDesc && !hasTarget && len(addLabels)+len(removeLabels) > 0 {
		// add_labels and remove_labels alone (doc/api/merge_requests.md
		// "Update MR"): one update hook with changes.labels.
		s.changeLabels(mr, rc.user, addLabels, removeLabels)
		rc.writeJSON(http.StatusOK, s.mrJSON(mr, rc.user, false))
		return
	}
	if event == "" && !hasTitle && !hasDesc && !hasTarget {
		rc.writeJSON(http.StatusBadRequest, map[string]any{"error": "title, description, state_event, target_branch are missing, at least one parameter must be provided"})
		return
	}
	if !rc.withinLimits(mrLimits...) {
		return
	}
	changes := map[string]any{}
	if hasTitle && title != mr.title {
		changes["title"] = change(mr.title, title)
		mr.title = title
		if draft := isDraftTitle(title); draft != mr.block.Draft {
			// GitLab derives the draft flag from the title's prefix and
			// reports the toggle as changes.draft (gitlab-org/gitlab!126899).
			changes["draft"] = change(mr.block.Draft, draft)
			mr.block.Draft = draft
		}
	}
	if hasDesc && desc != mr.description {
		changes["description"] = change(mr.description, desc)
		mr.description = desc
	}
	if hasTarget && target != mr.targetBranch {
		if msg := s.targetRefusal(mr, target); msg != "" {
			status := http.StatusUnprocessableEntity
			if strings.HasPrefix(msg, "Another open merge request") {
				status = http.StatusConflict
			}
			rc.fail(status, []string{msg})
			return
		}
		changes["target_branch"] = change(mr.targetBranch, target)
		mr.targetBranch, mr.startSHA = target, mr.p.repo.branches[target]
	}
	if len(changes) > 0 {
		var prevBy, prevAt any
		if mr.editedBy != nil {
			prevBy, prevAt = mr.editedBy.id, hookTime(mr.editedAt)
		}
		changes["updated_at"] = change(hookTime(mr.updated), hookTime(s.now()))
		mr.updated, mr.editedAt, mr.editedBy = s.now(), s.now(), rc.user
		changes["updated_by_id"] = change(prevBy, rc.user.id)
		changes["last_edited_at"] = change(prevAt, hookTime(mr.editedAt))
		changes["last_edited_by_id"] = change(prevBy, rc.user.id)
		s.emitMRHook(mr, rc.user, "update", hookExtra{changes: changes})
	}
	switch {
	case event == "close" && mr.state == stateOpened:
		s.closeMR(mr, rc.user)
	case event == "reopen" && mr.state == stateClosed:
		s.reopenMR(mr, rc.user)
	}
	rc.writeJSON(http.StatusOK, s.mrJSON(mr, rc.user, false))
}

// targetRefusal is why GitLab refuses to retarget mr onto target, as it
// refuses to create such an MR ("" when it may): target must exist, differ
// from the source branch, and not make a second open MR of the same source
// and target (doc/api/merge_requests.md "Update MR", target_branch).
func (s *Server) targetRefusal(mr *mergeRequest, target string) string {
	switch _, ok := mr.p.repo.branches[target]; {
	case !ok:
		return fmt.Sprintf("Target branch %q does not exist", target)
	case target == mr.sourceBranch:
		return "You can't use same project/branch for source and target"
	}
	for _, o := range mr.p.sortedMRs() {
		if o != mr && o.state == stateOpened && o.sourceBranch == mr.sourceBranch && o.targetBranch == target {
			return fmt.Sprintf("Another open merge request already exists for this source branch: !%d", o.iid)
		}
	}
	return ""
}

func (s *Server) closeMR(mr *mergeRequest, by *user) {
	prev := mr.updated
	mr.state, mr.closedBy, mr.closedAt, mr.updated = stateClosed, by, s.now(), s.now()
	s.addSystemNote(mr, by, "closed")
	s.emitMRHook(mr, by, "close", hookExtra{changes: map[string]any{
		"state_id":   change(1, 2),
		"updated_at": change(hookTime(prev), hookTime(mr.updated)),
	}})
}

func (s *Server) reopenMR(mr *mergeRequest, by *user) {
	prev := mr.updated
	mr.state, mr.closedBy, mr.closedAt, mr.updated = stateOpened, nil, time.Time{}, s.now()
	s.addSystemNote(mr, by, "reopened")
	s.emitMRHook(mr, by, "reopen", hookExtra{changes: map[string]any{
		"state_id":   change(2, 1),
		"updated_at": change(hookTime(prev), hookTime(mr.updated)),
	}})
}

// isDraftTitle reports whether title marks a draft: it starts with
// "Draft:", "[Draft]" or "(Draft)" in any case (GitLab's "Draft merge
// requests": removing the prefix marks the MR ready).
func isDraftTitle(title string) bool {
	t := strings.ToLower(strings.TrimSpace(title))
	return strings.HasPrefix(t, "draft:") || strings.HasPrefix(t, "[draft]") || strings.HasPrefix(t, "(draft)")
}

func change(prev, cur any) map[string]any { return map[string]any{"previous": prev, "current": cur} }

// mrJSON is API::Entities::MergeRequest (fixtures api-mr-get.json,
// api-mr-get-doc.json) as seen by viewer.
func (s *Server) mrJSON(mr *mergeRequest, viewer *user, withRebase bool) map[string]any {
	p := mr.p
	ref := fmt.Sprintf("!%d", mr.iid)
	var hp any
	var pipe any
	if pl := s.headPipeline(mr); pl != nil {
		hp = s.pipelineJSON(pl, true)
		pipe = s.pipelineJSON(pl, false)
	}
	var mergedBy, closedBy any
	if mr.mergedBy != nil {
		mergedBy = s.userBasic(mr.mergedBy)
	}
	if mr.closedBy != nil {
		closedBy = s.userBasic(mr.closedBy)
	}
	base := p.repo.mergeBase(mr.sha, mr.startSHA)
	m := map[string]any{
		"id": mr.id, "iid": mr.iid, "project_id": p.id, "title": mr.title, "description": mr.description,
		"state": mr.state, "imported": false, "imported_from": "none",
		"created_at": restTime(mr.created), "updated_at": restTime(mr.updated),
		"merged_by": mergedBy, "merge_user": mergedBy, "merged_at": timeOrNil(mr.mergedAt),
		"merge_after": nil, "prepared_at": restTime(mr.created),
		"closed_by": closedBy, "closed_at": timeOrNil(mr.closedAt),
		"target_branch": mr.targetBranch, "source_branch": mr.sourceBranch,
		"user_notes_count": mr.userNotes(), "upvotes": 0, "downvotes": 0,
		"author": s.userBasic(mr.author), "assignee": nil, "assignees": []any{}, "reviewers": []any{},
		"source_project_id": p.id, "target_project_id": p.id, "labels": append([]string{}, mr.labels...),
		"draft": mr.block.Draft, "work_in_progress": mr.block.Draft, "milestone": nil,
		"merge_when_pipeline_succeeds": false,
		"merge_status":                 s.mergeStatus(mr), "detailed_merge_status": s.detailedStatus(mr),
		"sha": mr.sha, "merge_commit_sha": strOrNil(mr.mergeCommitSHA), "squash_commit_sha": strOrNil(mr.squashCommit),
		"discussion_locked": nil, "should_remove_source_branch": mr.removeSource, "force_remove_source_branch": mr.removeSource,
		"reference": ref, "references": map[string]any{"short": ref, "relative": ref, "full": p.PathWithNamespace + ref},
		"web_url": s.mrURL(mr),
		"time_stats": map[string]any{
			"time_estimate": 0, "total_time_spent": 0, "human_time_estimate": nil, "human_total_time_spent": nil,
		},
		"squash": mr.squash, "squash_on_merge": mr.squash,
		"task_completion_status": map[string]any{"count": 0, "completed_count": 0},
		"has_conflicts":          mr.hasConflicts, "blocking_discussions_resolved": true,
		"approvals_before_merge": nil, "subscribed": false, "changes_count": "1",
		"latest_build_started_at": nil, "latest_build_finished_at": nil, "first_deployed_to_production_at": nil,
		"pipeline": pipe, "head_pipeline": hp,
		"diff_refs":   map[string]any{"base_sha": base, "head_sha": mr.sha, "start_sha": mr.startSHA},
		"merge_error": strOrNil(mr.mergeError), "first_contribution": false,
		"user": map[string]any{"can_merge": p.access(viewer) >= p.MergeAccessLevel},
	}
	if withRebase {
		m["rebase_in_progress"] = mr.rebaseInProgress
	}
	return m
}

func (s *Server) mrURL(mr *mergeRequest) string {
	return fmt.Sprintf("%s/-/merge_requests/%d", s.projectURL(mr.p), mr.iid)
}

func (mr *mergeRequest) userNotes() int {
	n := 0
	for _, x := range mr.notes {
		if !x.system {
			n++
		}
	}
	return n
}
