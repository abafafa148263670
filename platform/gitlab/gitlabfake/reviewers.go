package gitlabfake

// RequestReviewAsUser makes username request reviewer (created on first
// use) as a reviewer of MR !iid, as PUT .../merge_requests/:iid with
// reviewer_ids does (doc/api/merge_requests.md): a Merge Request Hook
// "update" with changes.reviewers {"previous", "current"} of user hook
// objects (GitLab's webhook_events.md, Merge request events; the
// top-level reviewers of fixture webhook-merge_request-open.json). A
// reviewer already requested changes nothing.
func (s *Server) RequestReviewAsUser(projectID, iid int64, username, reviewer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projects[projectID]
	if p == nil || p.mrs[iid] == nil {
		return
	}
	mr, r := p.mrs[iid], s.userByName(reviewer)
	for _, have := range mr.reviewers {
		if have == r {
			return
		}
	}
	before := s.reviewersHook(mr)
	mr.reviewers = append(mr.reviewers, r)
	prev := mr.updated
	mr.updated = s.now()
	s.emitMRHook(mr, s.userByName(username), "update", hookExtra{changes: map[string]any{
		"reviewers":  change(before, s.reviewersHook(mr)),
		"updated_at": change(hookTime(prev), hookTime(mr.updated)),
	}})
}

// reviewersHook are mr's reviewers as user hook objects.
func (s *Server) reviewersHook(mr *mergeRequest) []any {
	out := []any{}
	for _, u := range mr.reviewers {
		out = append(out, s.userHook(u))
	}
	return out
}

// RemoveReviewAsUser makes username take reviewer off MR !iid's reviewers,
// with the same update hook as RequestReviewAsUser; a reviewer not
// requested changes nothing.
func (s *Server) RemoveReviewAsUser(projectID, iid int64, username, reviewer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.projects[projectID]
	if p == nil || p.mrs[iid] == nil {
		return
	}
	mr, r := p.mrs[iid], s.userByName(reviewer)
	before := s.reviewersHook(mr)
	kept := mr.reviewers[:0:0]
	for _, have := range mr.reviewers {
		if have != r {
			kept = append(kept, have)
		}
	}
	if len(kept) == len(mr.reviewers) {
		return
	}
	mr.reviewers = kept
	prev := mr.updated
	mr.updated = s.now()
	s.emitMRHook(mr, s.userByName(username), "update", hookExtra{changes: map[string]any{
		"reviewers":  change(before, s.reviewersHook(mr)),
		"updated_at": change(hookTime(prev), hookTime(mr.updated)),
	}})
}
