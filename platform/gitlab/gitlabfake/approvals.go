package gitlabfake

import (
	"encoding/json"
	"net/http"
	"slices"
)

// approvalsJSON is the EE ApprovalState entity answered by GET .../approvals
// and POST .../approve|unapprove (fixtures api-mr-approvals-get.json,
// api-mr-approve.json), as seen by viewer.
func (s *Server) approvalsJSON(mr *mergeRequest, viewer *user) map[string]any {
	by := []any{}
	for _, u := range mr.approvals {
		by = append(by, map[string]any{"user": s.userBasic(u)})
	}
	left := max(0, mr.p.ApprovalsRequired-len(mr.approvals))
	return map[string]any{
		"id": mr.id, "iid": mr.iid, "project_id": mr.p.id, "title": mr.title, "description": mr.description,
		"state": mr.state, "created_at": restTime(mr.created), "updated_at": restTime(mr.updated),
		"merge_status": s.mergeStatus(mr), "approved": len(mr.approvals) > 0 && left == 0,
		"approvals_required": mr.p.ApprovalsRequired, "approvals_left": left,
		"require_password_to_approve": false, "approved_by": by,
		"suggested_approvers": []any{}, "approvers": []any{}, "approver_groups": []any{},
		"user_has_approved": mr.approvedBy(viewer), "user_can_approve": s.canApprove(mr, viewer),
		"approval_rules_left": []any{}, "has_approval_rules": false,
		"merge_request_approvers_available": false, "multiple_approval_rules_available": false,
		"invalid_approvers_rules": []any{},
	}
}

func (mr *mergeRequest) approvedBy(u *user) bool { return slices.Contains(mr.approvals, u) }

// canApprove mirrors ApprovalService's can_be_approved_by?: an open MR, not
// yet approved by u, u at least Developer.
func (s *Server) canApprove(mr *mergeRequest, u *user) bool {
	return u != nil && mr.state == stateOpened && !mr.approvedBy(u) && mr.p.access(u) >= AccessDeveloper
}

// getApprovals serves GET /projects/:id/merge_requests/:iid/approvals.
func (s *Server) getApprovals(rc *reqCtx) {
	_, mr := s.mr(rc)
	if mr == nil {
		return
	}
	rc.writeJSON(http.StatusOK, s.approvalsJSON(mr, rc.user))
}

// approve serves POST .../approve, in GitLab's order
// (lib/api/merge_request_approvals.rb): 403 "403 Forbidden" below Developer
// (authorize! :approve_merge_request); 409 "SHA does not match HEAD of source
// branch: <sha>" when sha is given and differs; the platform checklist (422
// {"message":"checklist mismatch","items":[...]}); 401 "401 Unauthorized"
// when ApprovalService refuses (already approved by this user, MR not open).
// 201 with the approval state; emits the Merge Request Hook "approved".
func (s *Server) approve(rc *reqCtx) {
	_, mr := s.mr(rc)
	if mr == nil || !rc.requireAccess(mr.p, AccessDeveloper) {
		return
	}
	if sha, ok := rc.str("sha"); ok && sha != "" && sha != mr.sha {
		rc.fail(http.StatusConflict, "SHA does not match HEAD of source branch: "+sha)
		return
	}
	if !checklistConfirmed(mr.p.checklist, rc.json["checklist"]) {
		rc.writeJSON(http.StatusUnprocessableEntity, map[string]any{"message": "checklist mismatch", "items": mr.p.checklist})
		return
	}
	if !s.approveAs(mr, rc.user) {
		rc.fail(http.StatusUnauthorized, "401 Unauthorized")
		return
	}
	rc.writeJSON(http.StatusCreated, s.approvalsJSON(mr, rc.user))
}

// approveAs records u's approval, adds the system note and emits the hook;
// false when ApprovalService would refuse.
func (s *Server) approveAs(mr *mergeRequest, u *user) bool {
	if !s.canApprove(mr, u) {
		return false
	}
	s.recordApproval(mr, u)
	return true
}

func (s *Server) recordApproval(mr *mergeRequest, u *user) {
	mr.approvals = append(mr.approvals, u)
	s.addSystemNote(mr, u, "approved this merge request")
	s.emitMRHook(mr, u, "approved", hookExtra{changes: map[string]any{}})
}

// unapprove serves POST .../unapprove: 404 "404 Not Found" when the user
// had not approved; 201 with the approval state; emits "unapproved".
func (s *Server) unapprove(rc *reqCtx) {
	_, mr := s.mr(rc)
	if mr == nil {
		return
	}
	if !s.unapproveAs(mr, rc.user) {
		rc.fail(http.StatusNotFound, "404 Not Found")
		return
	}
	rc.writeJSON(http.StatusCreated, s.approvalsJSON(mr, rc.user))
}

func (s *Server) unapproveAs(mr *mergeRequest, u *user) bool {
	i := slices.Index(mr.approvals, u)
	if i < 0 {
		return false
	}
	mr.approvals = slices.Delete(mr.approvals, i, i+1)
	s.addSystemNote(mr, u, "unapproved this merge request")
	s.emitMRHook(mr, u, "unapproved", hookExtra{changes: map[string]any{}})
	return true
}

// ApproveAsUser makes username (created on first use) approve MR !iid as a
// human would in the UI, skipping permission checks: records the approval,
// adds a system note and emits the Merge Request Hook "approved". A second
// approval by the same user does nothing.
func (s *Server) ApproveAsUser(projectID, iid int64, username string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projects[projectID]
	if p == nil || p.mrs[iid] == nil {
		return
	}
	mr := p.mrs[iid]
	u := s.userByName(username)
	if mr.state == stateOpened && !mr.approvedBy(u) {
		s.recordApproval(mr, u)
	}
}

// checklistConfirmed reports whether raw (the "checklist" field of the
// approve body) confirms exactly the project's items. No checklist: always.
func checklistConfirmed(items []ChecklistItem, raw any) bool {
	if len(items) == 0 {
		return true
	}
	b, _ := json.Marshal(raw)
	var got []struct {
		ID        string `json:"id"`
		Confirmed bool   `json:"confirmed"`
	}
	if json.Unmarshal(b, &got) != nil || len(got) != len(items) {
		return false
	}
	confirmed := map[string]bool{}
	for _, g := range got {
		if g.Confirmed {
			confirmed[g.ID] = true
		}
	}
	for _, it := range items {
		if !confirmed[it.ID] {
			return false
		}
	}
	return true
}
