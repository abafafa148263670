package githubfake

import (
	"fmt"
	"net/http"
	"strings"
)

// graphql answers POST /graphql (docs.github.com "Forming calls with
// GraphQL": {"query", "variables"} in, {"data"} or {"data", "errors"} out,
// HTTP 200 either way). It is no GraphQL engine: it recognises the three
// documents changebot sends by their fields and reads their variables.
//
//   - repository(owner: $owner, name: $name) { mergeQueue(branch: $branch) { id } }
//     answers the queue's id, or null when the branch requires none
//     (SetMergeQueue);
//   - repository(...) { pullRequest(number: $number) { merged state
//     mergeQueueEntry { state position } } } answers the pull request's
//     entry, null when it is not queued;
//   - mutation enqueuePullRequest(input: $input) with input
//     {pullRequestId, expectedHeadOid} enqueues; a stale expectedHeadOid is
//     refused (type UNPROCESSABLE, "Head branch was modified. Review and try
//     the merge again.", the words of the REST merge's 409: GitHub's exact
//     words for enqueue were not found), as is a branch without a queue, a
//     closed pull request and one already queued.
//
// Errors follow GitHub's shape: {"type", "path", "message"}, for example
// NOT_FOUND "Could not resolve to a Repository with the name 'o/r'.".
func (s *Server) graphql(rc *reqCtx) {
	q, _ := rc.body["query"].(string)
	vars, _ := rc.body["variables"].(map[string]any)
	str := func(k string) string { v, _ := vars[k].(string); return v }
	count := func(field string) {
		if s.gqlCalls == nil {
			s.gqlCalls = map[string]int{}
		}
		s.gqlCalls[field]++
	}
	switch {
	case strings.Contains(q, "enqueuePullRequest("):
		count("enqueuePullRequest")
		in, _ := vars["input"].(map[string]any)
		id, _ := in["pullRequestId"].(string)
		oid, _ := in["expectedHeadOid"].(string)
		s.gqlEnqueue(rc, id, oid)
	case strings.Contains(q, "mergeQueueEntry") && strings.Contains(q, "pullRequest("):
		count("mergeQueueEntry")
		r := s.gqlRepo(rc, str("owner"), str("name"))
		if r == nil {
			return
		}
		n, _ := vars["number"].(float64)
		pr := r.pulls[int64(n)]
		if pr == nil {
			gqlError(rc, "NOT_FOUND", []any{"repository", "pullRequest"}, fmt.Sprintf("Could not resolve to a PullRequest with the number of %d.", int64(n)))
			return
		}
		var entry any
		if e, pos := s.queueEntryOf(r, pr.number); e != nil {
			entry = map[string]any{"state": e.state, "position": pos}
		}
		state := map[string]string{"open": "OPEN", "closed": "CLOSED"}[pr.state]
		if pr.merged {
			state = "MERGED"
		}
		rc.json(http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{
			"pullRequest": map[string]any{"merged": pr.merged, "state": state, "mergeQueueEntry": entry}}}})
	case strings.Contains(q, "mergeQueue("):
		count("mergeQueue")
		r := s.gqlRepo(rc, str("owner"), str("name"))
		if r == nil {
			return
		}
		var mq any
		if b := str("branch"); r.mergeQueues[b] {
			mq = map[string]any{"id": nodeID("MQ_", r.ID) + "_" + b}
		}
		rc.json(http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{"mergeQueue": mq}}})
	default:
		gqlError(rc, "INTERNAL", nil, "the fake answers only the documents listed on Server.graphql")
	}
}

// gqlRepo resolves owner/name, or answers NOT_FOUND and returns nil.
func (s *Server) gqlRepo(rc *reqCtx, owner, name string) *repo {
	r := s.byName[strings.ToLower(owner+"/"+name)]
	if r == nil {
		gqlError(rc, "NOT_FOUND", []any{"repository"}, fmt.Sprintf("Could not resolve to a Repository with the name '%s/%s'.", owner, name))
	}
	return r
}

// gqlEnqueue runs enqueuePullRequest for the pull request with node id id.
func (s *Server) gqlEnqueue(rc *reqCtx, id, oid string) {
	var r *repo
	var pr *pull
	for _, rr := range s.repos {
		for _, p := range rr.pulls {
			if nodeID("PR_", p.id) == id {
				r, pr = rr, p
			}
		}
	}
	path := []any{"enqueuePullRequest"}
	switch {
	case pr == nil:
		gqlError(rc, "NOT_FOUND", path, fmt.Sprintf("Could not resolve to a node with the global id of '%s'", id))
		return
	case permissionRank[r.permissionOf(rc.caller)] < permissionRank["write"]:
		gqlError(rc, "FORBIDDEN", path, "Resource not accessible by integration")
		return
	case pr.state != "open":
		gqlError(rc, "UNPROCESSABLE", path, "Pull request is closed")
		return
	case !r.mergeQueues[pr.base]:
		gqlError(rc, "UNPROCESSABLE", path, "Merge queue is not enabled for the base branch")
		return
	case oid != "" && oid != s.headOf(r, pr):
		gqlError(rc, "UNPROCESSABLE", path, "Head branch was modified. Review and try the merge again.")
		return
	}
	if e, _ := s.queueEntryOf(r, pr.number); e != nil {
		gqlError(rc, "UNPROCESSABLE", path, "Pull request is already in the merge queue")
		return
	}
	e := s.enqueuePull(r, pr, s.headOf(r, pr), rc.caller)
	_, pos := s.queueEntryOf(r, pr.number)
	rc.json(http.StatusOK, map[string]any{"data": map[string]any{"enqueuePullRequest": map[string]any{
		"mergeQueueEntry": map[string]any{"state": e.state, "position": pos}}}})
}

// gqlError answers GraphQL's error shape with data null.
func gqlError(rc *reqCtx, typ string, path []any, msg string) {
	e := map[string]any{"type": typ, "message": msg, "locations": []any{map[string]any{"line": 1, "column": 1}}}
	if path != nil {
		e["path"] = path
	}
	rc.json(http.StatusOK, map[string]any{"data": nil, "errors": []any{e}})
}

// GraphQLCalls is how many POST /graphql documents asked for field
// ("mergeQueue", "mergeQueueEntry" or "enqueuePullRequest"), whatever
// their answer.
func (s *Server) GraphQLCalls(field string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gqlCalls[field]
}
