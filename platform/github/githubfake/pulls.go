package githubfake

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

type pull struct {
	id, number     int64
	title, body    string
	head, base     string // branch names
	headSHA        string // frozen when closed
	state          string // open, closed
	draft          bool
	merged         bool
	mergedAt       time.Time
	closedAt       time.Time
	mergedBy       *user
	mergeSHA       string
	author         *user
	created        time.Time
	updated        time.Time
	reviews        []*review
	conflict       bool   // SetConflict
	block          string // BlockMerge message
	mergeableKnown bool
	labels         []string // names, in the order added (SetLabelsAs)
}

type review struct {
	id       int64
	user     *user
	state    string // APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED
	commitID string
	body     string
	at       time.Time
}

// PullSnapshot is a pull request as tests see it.
type PullSnapshot struct {
	ID, Number     int64
	State          string // open, closed
	Merged         bool
	HeadSHA        string
	Head, Base     string
	MergeCommitSHA string
	MergedBy       string
	Author         string
	Draft          bool
	// Approvals are the logins whose latest review approves.
	Approvals []string
}

// PullRequest returns pull request #number of repository repoID.
func (s *Server) PullRequest(repoID, number int64) (PullSnapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	pr := r.pulls[number]
	if pr == nil {
		return PullSnapshot{}, false
	}
	out := PullSnapshot{ID: pr.id, Number: pr.number, State: pr.state, Merged: pr.merged, HeadSHA: s.headOf(r, pr),
		Head: pr.head, Base: pr.base, MergeCommitSHA: pr.mergeSHA, Author: pr.author.Login, Draft: pr.draft}
	if pr.mergedBy != nil {
		out.MergedBy = pr.mergedBy.Login
	}
	for _, rv := range latestReviews(pr) {
		if rv.state == "APPROVED" {
			out.Approvals = append(out.Approvals, rv.user.Login)
		}
	}
	return out, true
}

// SetConflict makes pull request #number conflict with its base (or not):
// mergeable false and mergeable_state dirty; merge answers 405 and
// update-branch 422.
func (s *Server) SetConflict(repoID, number int64, conflict bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := s.repos[repoID].pulls[number]
	pr.conflict, pr.mergeableKnown = conflict, false
}

// BlockMerge makes merging pull request #number answer 405 with message
// ("" lifts it), as a rule GitHub enforces that the fake does not model
// (for example a ruleset).
func (s *Server) BlockMerge(repoID, number int64, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[repoID].pulls[number].block = message
}

// ApproveAs submits an APPROVE review of the head as login (a person).
func (s *Server) ApproveAs(repoID, number int64, login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	pr := r.pulls[number]
	s.addReview(r, pr, s.byLogin[login], "APPROVED", s.headOf(r, pr), "")
}

func (r *repo) sortedPulls() []*pull {
	out := make([]*pull, 0, len(r.pulls))
	for _, p := range r.pulls {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *pull) int { return int(a.number - b.number) })
	return out
}

// headOf is the pull request's head sha: its branch's tip while open.
func (s *Server) headOf(r *repo, pr *pull) string {
	if pr.state == "open" {
		if sha, ok := r.refs[pr.head]; ok {
			return sha
		}
	}
	return pr.headSHA
}

func (s *Server) pullOf(rc *reqCtx) (*repo, *pull) {
	r := s.repoOf(rc)
	if r == nil {
		return nil, nil
	}
	pr := r.pulls[rc.intParam("n")]
	if pr == nil {
		rc.fail(http.StatusNotFound, "Not Found")
		return nil, nil
	}
	return r, pr
}

// latestReviews is each reviewer's latest APPROVED, CHANGES_REQUESTED or
// DISMISSED review, in order of first review.
func latestReviews(pr *pull) []*review {
	var order []*user
	latest := map[*user]*review{}
	for _, rv := range pr.reviews {
		if rv.state == "COMMENTED" {
			continue
		}
		if _, ok := latest[rv.user]; !ok {
			order = append(order, rv.user)
		}
		latest[rv.user] = rv
	}
	out := make([]*review, 0, len(order))
	for _, u := range order {
		out = append(out, latest[u])
	}
	return out
}

// conflicts reports whether head and base changed one path differently
// since their merge base.
func (s *Server) conflicts(baseSHA, headSHA string) bool {
	mb := s.objects.commits[s.mergeBase(baseSHA, headSHA)]
	if mb == nil {
		return true
	}
	m, b, h := s.objects.trees[mb.tree], s.objects.trees[s.objects.commits[baseSHA].tree], s.objects.trees[s.objects.commits[headSHA].tree]
	for p := range union(b, h) {
		if b[p] != m[p] && h[p] != m[p] && b[p] != h[p] {
			return true
		}
	}
	return false
}

func union(ms ...map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			out[k] = true
		}
	}
	return out
}

// mergedTree is base's tree with head's changes since the merge base.
func (s *Server) mergedTree(baseSHA, headSHA string) string {
	mb := s.objects.commits[s.mergeBase(baseSHA, headSHA)]
	m := map[string]string{}
	if mb != nil {
		m = s.objects.trees[mb.tree]
	}
	b, h := s.objects.trees[s.objects.commits[baseSHA].tree], s.objects.trees[s.objects.commits[headSHA].tree]
	out := map[string]string{}
	for k, v := range b {
		out[k] = v
	}
	for p := range union(m, h) {
		if h[p] == m[p] {
			continue
		}
		if v, ok := h[p]; ok {
			out[p] = v
		} else {
			delete(out, p)
		}
	}
	return s.objects.putTree(out)
}

// mergeState computes mergeable and mergeable_state (and the 405 message
// a merge would get now, "" when it can merge).
func (s *Server) mergeState(r *repo, pr *pull) (mergeable bool, state, refusal string) {
	head := s.headOf(r, pr)
	base := r.refs[pr.base]
	switch {
	case pr.draft:
		return true, "draft", "Pull Request is still a draft"
	case pr.conflict || s.conflicts(base, head):
		return false, "dirty", "Pull Request is not mergeable"
	case r.spec.Strict && pr.base == r.DefaultBranch && !s.isAncestor(base, head):
		return true, "behind", "Head branch is out of date. Review and try the merge again."
	}
	for _, ctx := range r.requiredFor(pr.base) {
		st, found := s.checkState(r, head, ctx)
		switch {
		case !found:
			return true, "blocked", fmt.Sprintf("Required status check %q is expected.", ctx)
		case st == "pending":
			return true, "blocked", fmt.Sprintf("Required status check %q is in progress.", ctx)
		case st != "success":
			return true, "blocked", fmt.Sprintf("Required status check %q is failing.", ctx)
		}
	}
	if n := r.spec.RequiredApprovals; n > 0 && pr.base == r.DefaultBranch && s.approvals(r, pr) < n {
		return true, "blocked", fmt.Sprintf("At least %d approving review is required by reviewers with write access.", n)
	}
	if pr.block != "" {
		return true, "blocked", pr.block
	}
	for _, c := range s.latestChecks(r, head) {
		if c != "success" {
			return true, "unstable", ""
		}
	}
	return true, "clean", ""
}

// approvals counts approving reviews by writers (of the head when stale
// reviews are dismissed).
func (s *Server) approvals(r *repo, pr *pull) int {
	n := 0
	for _, rv := range latestReviews(pr) {
		if rv.state == "APPROVED" && permissionRank[r.permissionOf(rv.user)] >= permissionRank["write"] &&
			(!r.spec.DismissStaleReviews || rv.commitID == s.headOf(r, pr)) {
			n++
		}
	}
	return n
}

// mergeableJSON reads mergeable lazily: the first read after a change
// answers null and "unknown", the next the computed values.
func (s *Server) mergeableJSON(r *repo, pr *pull) (any, string) {
	if pr.state != "open" {
		return nil, "unknown"
	}
	if !pr.mergeableKnown {
		pr.mergeableKnown = true
		return nil, "unknown"
	}
	m, st, _ := s.mergeState(r, pr)
	return m, st
}

func (s *Server) listPulls(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil {
		return
	}
	state := rc.query("state")
	if state == "" {
		state = "open"
	}
	headOwner, headBranch, _ := strings.Cut(rc.query("head"), ":")
	var out []any
	pulls := r.sortedPulls()
	if rc.query("direction") != "asc" {
		slices.Reverse(pulls)
	}
	for _, pr := range pulls {
		if (state != "all" && pr.state != state) || (headBranch != "" && (pr.head != headBranch || !strings.EqualFold(headOwner, r.Owner))) ||
			(rc.query("base") != "" && pr.base != rc.query("base")) {
			continue
		}
		out = append(out, s.pullJSON(r, pr, false))
	}
	rc.json(http.StatusOK, append([]any{}, paginate(rc, out, 30)...))
}

// createPull answers POST .../pulls (fixtures
// api-pulls-create-request.json; answer api-pulls-get.json); a body over
// MaxBodyChars answers 422.
func (s *Server) createPull(rc *reqCtx) {
	r := s.repoOf(rc)
	if r == nil || !rc.canWrite(r) || !rc.bodyWithinLimit("PullRequest") {
		return
	}
	head, base := rc.str("head"), rc.str("base")
	if o, b, ok := strings.Cut(head, ":"); ok && strings.EqualFold(o, r.Owner) {
		head = b
	}
	switch {
	case r.refs[head] == "":
		rc.invalid("PullRequest", "head", "invalid", "")
		return
	case r.refs[base] == "":
		rc.invalid("PullRequest", "base", "invalid", "")
		return
	case r.refs[head] == r.refs[base] || s.isAncestor(r.refs[head], r.refs[base]):
		rc.invalid("PullRequest", "", "custom", "No commits between "+base+" and "+head)
		return
	}
	for _, pr := range r.pulls {
		if pr.state == "open" && pr.head == head && pr.base == base {
			rc.invalid("PullRequest", "", "custom", "A pull request already exists for "+r.Owner+":"+head+".")
			return
		}
	}
	s.ids.pull++
	r.number++
	now := s.now().UTC()
	pr := &pull{id: s.ids.pull, number: r.number, title: rc.str("title"), body: rc.str("body"), head: head, base: base,
		state: "open", draft: rc.flag("draft"), author: rc.caller, created: now, updated: now}
	r.pulls[pr.number] = pr
	s.emitPull(r, pr, "opened", rc.caller, nil)
	s.startCI(r, r.refs[head], head)
	rc.json(http.StatusCreated, s.pullJSON(r, pr, true))
}

func (s *Server) getPull(rc *reqCtx) {
	if r, pr := s.pullOf(rc); pr != nil {
		rc.json(http.StatusOK, s.pullJSON(r, pr, true))
	}
}

// updatePull answers PATCH .../pulls/{n} (docs.github.com "Update a pull
// request"): title, body (at most MaxBodyChars, else 422), state
// open/closed, and base, the branch it merges into, which must exist, not
// be the head and not be changed on a closed pull request (422). A change
// of title, body or base sends the pull_request "edited" webhook with
// changes.<field>.from, and for the base also changes.base.sha.from, the
// old base's tip (fixture webhook-pull_request-edited.json for the title;
// docs.github.com "Webhook events and payloads", pull_request edited).
func (s *Server) updatePull(rc *reqCtx) {
	r, pr := s.pullOf(rc)
	if pr == nil || !rc.canWrite(r) || !rc.bodyWithinLimit("PullRequest") {
		return
	}
	changes := map[string]any{}
	if base, ok := rc.body["base"].(string); ok && base != pr.base {
		switch {
		case pr.state != "open":
			rc.invalid("PullRequest", "base", "custom", "Cannot change the base branch of a closed pull request.")
			return
		case r.refs[base] == "" || base == pr.head:
			rc.invalid("PullRequest", "base", "invalid", "")
			return
		}
		changes["base"] = s.setBase(r, pr, base)
	}
	if t := rc.str("title"); t != "" && t != pr.title {
		changes["title"] = map[string]any{"from": pr.title}
		pr.title = t
	}
	if b, ok := rc.body["body"].(string); ok && b != pr.body {
		changes["body"] = map[string]any{"from": pr.body}
		pr.body = b
	}
	if len(changes) > 0 {
		pr.updated = s.now().UTC()
		s.emitPull(r, pr, "edited", rc.caller, map[string]any{"changes": changes})
	}
	switch st := rc.str("state"); {
	case st == "closed" && pr.state == "open":
		s.closePull(r, pr, rc.caller)
	case st == "open" && pr.state == "closed" && !pr.merged:
		pr.state, pr.mergeableKnown, pr.closedAt = "open", false, time.Time{}
		s.emitPull(r, pr, "reopened", rc.caller, nil)
	}
	pr.updated = s.now().UTC()
	rc.json(http.StatusOK, s.pullJSON(r, pr, true))
}

// SetPullBase changes pull request #number's base to branch as login (a
// person editing it on GitHub), with the "edited" webhook updatePull
// sends.
func (s *Server) SetPullBase(repoID, number int64, branch, login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	pr := r.pulls[number]
	if pr == nil || pr.base == branch || r.refs[branch] == "" {
		return
	}
	changes := map[string]any{"base": s.setBase(r, pr, branch)}
	pr.updated = s.now().UTC()
	s.emitPull(r, pr, "edited", s.byLogin[login], map[string]any{"changes": changes})
}

// HoldUpdates holds every update-branch accepted from now on (202, the
// head unmoved) until FinishUpdates, as GitHub's asynchronous update may
// take long: a held update is not pending work for WaitIdle, so a test
// can watch the bot wait for it. HoldUpdates(false) stops holding new
// ones; the held ones still wait for FinishUpdates.
func (s *Server) HoldUpdates(hold bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdUpdates = hold
}

// FinishUpdates lands the held update-branches now, in the order they
// were accepted (each one only if the head is still the one it was asked
// on), and stops holding.
func (s *Server) FinishUpdates() {
	s.mu.Lock()
	defer s.mu.Unlock()
	held := s.heldUpdates
	s.heldUpdates, s.holdUpdates = nil, false
	for _, u := range held {
		u()
	}
}

// SetDraft converts pull request #number to a draft, or marks it ready
// for review, as login would on GitHub (its "Convert to draft" and "Ready
// for review" buttons; the GraphQL mutations convertPullRequestToDraft and
// markPullRequestReadyForReview), with the pull_request webhook
// converted_to_draft or ready_for_review (fixture
// webhook-pull_request-converted_to_draft.json). A draft cannot be merged
// (405 "Pull Request is still a draft").
func (s *Server) SetDraft(repoID, number int64, draft bool, login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	pr := r.pulls[number]
	if pr == nil || pr.draft == draft || pr.state != "open" {
		return
	}
	pr.draft, pr.mergeableKnown, pr.updated = draft, false, s.now().UTC()
	action := "ready_for_review"
	if draft {
		action = "converted_to_draft"
	}
	s.emitPull(r, pr, action, s.byLogin[login], nil)
}

// setBase moves pr onto base (its mergeability unknown again) and returns
// the edited webhook's changes.base: {"ref": {"from": <old base>}, "sha":
// {"from": <old base's tip>}}.
func (s *Server) setBase(r *repo, pr *pull, base string) map[string]any {
	ch := map[string]any{"ref": map[string]any{"from": pr.base}, "sha": map[string]any{"from": r.refs[pr.base]}}
	pr.base, pr.mergeableKnown = base, false
	return ch
}

func (s *Server) closePull(r *repo, pr *pull, by *user) {
	pr.headSHA = s.headOf(r, pr)
	pr.state, pr.closedAt = "closed", s.now().UTC()
	s.emitPull(r, pr, "closed", by, nil)
}

// ClosePull closes pull request #number as login (a person).
func (s *Server) ClosePull(repoID, number int64, login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	s.closePull(r, r.pulls[number], s.byLogin[login])
}

// mergePull answers PUT .../pulls/{n}/merge (fixtures
// api-pulls-merge-request.json, -200, -405, -409): 409 when sha is not the
// head, 405 when a merge method is not allowed or the pull request cannot
// merge now (mergeState's message), else it merges with merge_method.
func (s *Server) mergePull(rc *reqCtx) {
	r, pr := s.pullOf(rc)
	if pr == nil || !rc.canWrite(r) {
		return
	}
	head := s.headOf(r, pr)
	if pr.state != "open" {
		rc.fail(http.StatusMethodNotAllowed, "Pull Request is not mergeable")
		return
	}
	if sha := rc.str("sha"); sha != "" && sha != head {
		rc.fail(http.StatusConflict, "Head branch was modified. Review and try the merge again.")
		return
	}
	method := rc.str("merge_method")
	if method == "" {
		method = "merge"
	}
	allowed := map[string]bool{"merge": !r.spec.DisallowMergeCommit, "squash": !r.spec.DisallowSquash, "rebase": !r.spec.DisallowRebase}
	names := map[string]string{"merge": "Merge commits", "squash": "Squash merges", "rebase": "Rebase merges"}
	if ok, known := allowed[method]; !known || !ok {
		rc.fail(http.StatusMethodNotAllowed, names[method]+" are not allowed on this repository.")
		return
	}
	if refusal := r.queueRefusal(pr.base); refusal != "" {
		rc.fail(http.StatusMethodNotAllowed, refusal)
		return
	}
	if _, _, refusal := s.mergeState(r, pr); refusal != "" {
		rc.fail(http.StatusMethodNotAllowed, refusal)
		return
	}
	base := r.refs[pr.base]
	tree := s.mergedTree(base, head)
	title := rc.str("commit_title")
	if title == "" {
		title = fmt.Sprintf("Merge pull request #%d from %s/%s", pr.number, r.Owner, pr.head)
	}
	msg := title
	if m := rc.str("commit_message"); m != "" {
		msg += "\n\n" + m
	}
	var c *commit
	if method == "merge" {
		c = s.putCommit(tree, []string{base, head}, msg, rc.caller.Login)
	} else {
		c = s.putCommit(tree, []string{base}, msg, rc.caller.Login)
	}
	pr.headSHA = head
	pr.state, pr.merged, pr.mergedBy, pr.mergeSHA = "closed", true, rc.caller, c.sha
	pr.mergedAt, pr.closedAt = s.now().UTC(), s.now().UTC()
	s.emitPull(r, pr, "closed", rc.caller, nil)
	s.moveRef(r, pr.base, c.sha, rc.caller)
	rc.json(http.StatusOK, map[string]any{"sha": c.sha, "merged": true, "message": "Pull Request successfully merged"})
}

// updateBranch answers PUT .../pulls/{n}/update-branch (fixtures
// api-pulls-update-branch-request.json, -202): 422 when expected_head_sha
// is stale, the head already contains the base, or they conflict; else 202
// and, after Options.UpdateBranchDelay, the base is merged into the head.
func (s *Server) updateBranch(rc *reqCtx) {
	r, pr := s.pullOf(rc)
	if pr == nil || !rc.canWrite(r) {
		return
	}
	head, base := s.headOf(r, pr), r.refs[pr.base]
	switch exp := rc.str("expected_head_sha"); {
	case pr.state != "open":
		rc.fail(http.StatusUnprocessableEntity, "Pull request is closed")
		return
	case exp != "" && exp != head:
		rc.fail(http.StatusUnprocessableEntity, "expected head sha didn't match current head ref.")
		return
	case s.isAncestor(base, head):
		rc.fail(http.StatusUnprocessableEntity, "There are no new commits on the base branch.")
		return
	case pr.conflict || s.conflicts(base, head):
		rc.fail(http.StatusUnprocessableEntity, "merge conflict between base and head")
		return
	}
	by := rc.caller
	update := func() {
		if pr.state != "open" || s.headOf(r, pr) != head {
			return
		}
		base := r.refs[pr.base]
		c := s.putCommit(s.mergedTree(base, head), []string{head, base}, fmt.Sprintf("Merge branch '%s' into %s", pr.base, pr.head), by.Login)
		s.moveRef(r, pr.head, c.sha, by)
	}
	if s.holdUpdates {
		s.heldUpdates = append(s.heldUpdates, update)
	} else {
		s.schedule(s.opts.UpdateBranchDelay, update)
	}
	rc.json(http.StatusAccepted, map[string]any{"message": "Updating pull request branch.", "url": s.repoHTML(r) + fmt.Sprintf("/pull/%d", pr.number)})
}

func (s *Server) addReview(r *repo, pr *pull, u *user, state, commitID, body string) *review {
	s.ids.review++
	rv := &review{id: s.ids.review, user: u, state: state, commitID: commitID, body: body, at: s.now().UTC()}
	pr.reviews = append(pr.reviews, rv)
	pr.mergeableKnown = false
	s.emitReview(r, pr, rv, "submitted")
	return rv
}

func (s *Server) listReviews(rc *reqCtx) {
	r, pr := s.pullOf(rc)
	if pr == nil {
		return
	}
	out := make([]any, 0, len(pr.reviews))
	for _, rv := range pr.reviews {
		out = append(out, s.reviewJSON(r, pr, rv))
	}
	rc.json(http.StatusOK, append([]any{}, paginate(rc, out, 30)...))
}

// createReview answers POST .../pulls/{n}/reviews (fixtures
// api-pulls-create-review-request.json, api-pulls-create-review.json):
// APPROVE, REQUEST_CHANGES or COMMENT; the author cannot approve (422 "Can
// not approve your own pull request"); commit_id must be a commit of the
// pull request.
func (s *Server) createReview(rc *reqCtx) {
	r, pr := s.pullOf(rc)
	if pr == nil {
		return
	}
	states := map[string]string{"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}
	state, ok := states[rc.str("event")]
	if !ok {
		rc.invalid("PullRequestReview", "event", "invalid", "")
		return
	}
	if state == "APPROVED" && rc.caller == pr.author {
		rc.json(http.StatusUnprocessableEntity, map[string]any{"message": "Unprocessable Entity",
			"errors": []any{"Can not approve your own pull request"}, "documentation_url": docsURL})
		return
	}
	commitID := rc.str("commit_id")
	head := s.headOf(r, pr)
	if commitID == "" {
		commitID = head
	}
	if !s.isAncestor(commitID, head) {
		rc.invalid("PullRequestReview", "commit_id", "invalid", "")
		return
	}
	rv := s.addReview(r, pr, rc.caller, state, commitID, rc.str("body"))
	rc.json(http.StatusOK, s.reviewJSON(r, pr, rv))
}

// dismissReview answers PUT .../reviews/{id}/dismissals (writers only).
func (s *Server) dismissReview(rc *reqCtx) {
	r, pr := s.pullOf(rc)
	if pr == nil || !rc.canWrite(r) {
		return
	}
	for _, rv := range pr.reviews {
		if rv.id == rc.intParam("id") {
			if rv.state != "APPROVED" && rv.state != "CHANGES_REQUESTED" {
				rc.fail(http.StatusUnprocessableEntity, "Can not dismiss a "+strings.ToLower(rv.state)+" pull request review")
				return
			}
			rv.state = "DISMISSED"
			pr.mergeableKnown = false
			s.emitReview(r, pr, rv, "dismissed")
			rc.json(http.StatusOK, s.reviewJSON(r, pr, rv))
			return
		}
	}
	rc.fail(http.StatusNotFound, "Not Found")
}
