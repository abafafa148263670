package githubfake

import (
	"fmt"
	"slices"
	"time"
)

// Merge queues (SetMergeQueue), after GitHub's "Managing a merge queue"
// (docs.github.com): a branch that requires a merge queue refuses REST
// merges with 405 "Changes must be made through the merge queue"; pull
// requests enter it through GraphQL enqueuePullRequest (graphql.go); each
// entry is tested on a temporary branch
// gh-readonly-queue/<base>/pr-<number>-<head sha> that holds the base and
// the pull request merged, sending merge_group checks_requested; checks
// that pass make GitHub merge the pull request (the base moves to the
// group's commit, merge_group destroyed reason merged, pull_request
// closed with merged true); checks that fail remove it (merge_group
// destroyed reason dequeued, pull_request dequeued).
//
// Deliberate differences: the queue builds one entry at a time (GitHub's
// build concurrency 1, groups of one pull request); the group's checks are
// the repository's CI script (one workflow run, its next outcome, or the
// next of CIScript.MergeGroups), so a test makes them fail.

// mergeQueueRefusal is the 405 message of a REST merge on a branch that
// requires a merge queue, as bots quote it (cncf/prow-github-actions#166,
// NixOS/nixpkgs-merge-bot#202).
const mergeQueueRefusal = "Changes must be made through the merge queue"

// queueBranchPrefix starts the name of a merge group's temporary branch.
const queueBranchPrefix = "gh-readonly-queue/"

// queueEntry is one pull request in a branch's merge queue.
type queueEntry struct {
	pr        *pull
	headSHA   string
	enqueuer  *user
	at        time.Time
	state     string // QUEUED, AWAITING_CHECKS, MERGEABLE, UNMERGEABLE
	groupRef  string // gh-readonly-queue/... while building
	groupSHA  string
	groupBase string
}

// SetMergeQueue makes branch of repository repoID require a merge queue
// (or not): REST merges into it answer 405 and GraphQL
// repository.mergeQueue(branch) is non-null.
func (s *Server) SetMergeQueue(repoID int64, branch string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	if r.mergeQueues == nil {
		r.mergeQueues = map[string]bool{}
	}
	r.mergeQueues[branch] = on
}

// EnqueueCount is how many enqueuePullRequest mutations pull request
// #number of repository repoID was accepted for, and the head shas they
// named, in order.
func (s *Server) EnqueueCount(repoID, number int64) (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	shas := s.repos[repoID].enqueued[number]
	return len(shas), slices.Clone(shas)
}

// QueueEntryState is the state of pull request #number's merge queue
// entry (QUEUED, AWAITING_CHECKS, MERGEABLE, UNMERGEABLE), "" when it is
// not queued.
func (s *Server) QueueEntryState(repoID, number int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	if e, _ := s.queueEntryOf(r, number); e != nil {
		return e.state
	}
	return ""
}

// queueEntryOf is pull request #number's entry and its 1-based position.
func (s *Server) queueEntryOf(r *repo, number int64) (*queueEntry, int) {
	for _, q := range r.queues {
		for i, e := range q {
			if e.pr.number == number {
				return e, i + 1
			}
		}
	}
	return nil, 0
}

// enqueuePull adds pr, at head sha, to the queue of its base and starts
// building it when it is first.
func (s *Server) enqueuePull(r *repo, pr *pull, sha string, by *user) *queueEntry {
	if r.queues == nil {
		r.queues = map[string][]*queueEntry{}
		r.enqueued = map[int64][]string{}
	}
	e := &queueEntry{pr: pr, headSHA: sha, enqueuer: by, at: s.now().UTC(), state: "QUEUED"}
	r.queues[pr.base] = append(r.queues[pr.base], e)
	r.enqueued[pr.number] = append(r.enqueued[pr.number], sha)
	s.emitPull(r, pr, "enqueued", by, nil)
	s.buildQueue(r, pr.base)
	return e
}

// buildQueue builds the first entry of base's queue when none is being
// built: its group commit merges the pull request's head into the base
// (a conflict dequeues it), the temporary branch is created, merge_group
// checks_requested is sent and the CI script runs on the group.
func (s *Server) buildQueue(r *repo, base string) {
	q := r.queues[base]
	if len(q) == 0 || q[0].groupRef != "" {
		return
	}
	e := q[0]
	baseSHA := r.refs[base]
	if s.conflicts(baseSHA, e.headSHA) {
		s.dequeue(r, e, "MERGE_CONFLICT")
		return
	}
	msg := fmt.Sprintf("Merge pull request #%d from %s/%s", e.pr.number, r.Owner, e.pr.head)
	c := s.putCommit(s.mergedTree(baseSHA, e.headSHA), []string{baseSHA, e.headSHA}, msg, "github-merge-queue[bot]")
	e.groupRef = fmt.Sprintf("%s%s/pr-%d-%s", queueBranchPrefix, base, e.pr.number, e.headSHA)
	e.groupSHA, e.groupBase, e.state = c.sha, baseSHA, "AWAITING_CHECKS"
	r.refs[e.groupRef] = c.sha
	s.emitMergeGroup(r, e, "checks_requested", "")
	s.startCI(r, c.sha, e.groupRef)
}

// groupDone settles the entry whose group run just completed: success
// merges the pull request, anything else dequeues it. Then the next
// entry is built.
func (s *Server) groupDone(r *repo, run *workflowRun) {
	for base, q := range r.queues {
		if len(q) == 0 || q[0].groupSHA != run.sha {
			continue
		}
		e := q[0]
		if run.conclusion != "success" {
			s.dequeue(r, e, "CI_FAILURE")
			return
		}
		e.state = "MERGEABLE"
		r.queues[base] = q[1:]
		delete(r.refs, e.groupRef)
		s.emitMergeGroup(r, e, "destroyed", "merged")
		pr := e.pr
		pr.headSHA = e.headSHA
		pr.state, pr.merged, pr.mergedBy, pr.mergeSHA = "closed", true, e.enqueuer, e.groupSHA
		pr.mergedAt, pr.closedAt = s.now().UTC(), s.now().UTC()
		s.emitPull(r, pr, "closed", e.enqueuer, nil)
		s.moveRef(r, base, e.groupSHA, e.enqueuer)
		s.buildQueue(r, base)
		return
	}
}

// dequeue removes e from its queue (reason as in pull_request dequeued),
// destroying its merge group when one was built, and builds the next.
func (s *Server) dequeue(r *repo, e *queueEntry, reason string) {
	base := e.pr.base
	r.queues[base] = slices.DeleteFunc(r.queues[base], func(x *queueEntry) bool { return x == e })
	e.state = "UNMERGEABLE"
	if e.groupRef != "" {
		delete(r.refs, e.groupRef)
		s.emitMergeGroup(r, e, "destroyed", "dequeued")
	}
	s.emitPull(r, e.pr, "dequeued", nil, map[string]any{"reason": reason})
	s.buildQueue(r, base)
}

// emitMergeGroup sends merge_group (docs.github.com "Webhook events and
// payloads", merge_group: checks_requested, destroyed with reason merged,
// invalidated or dequeued; merge_group holds head_sha, head_ref, base_sha,
// base_ref and head_commit).
func (s *Server) emitMergeGroup(r *repo, e *queueEntry, action, reason string) {
	p := s.envelope(r, nil, action)
	c := s.objects.commits[e.groupSHA]
	p["merge_group"] = map[string]any{
		"head_sha": e.groupSHA, "head_ref": "refs/heads/" + e.groupRef,
		"base_sha": e.groupBase, "base_ref": "refs/heads/" + e.pr.base,
		"head_commit": map[string]any{"id": c.sha, "tree_id": c.tree, "message": c.message, "timestamp": ts(c.date),
			"author":    map[string]any{"name": c.author, "email": c.author + "@users.noreply.fake"},
			"committer": map[string]any{"name": c.author, "email": c.author + "@users.noreply.fake"}},
	}
	if reason != "" {
		p["reason"] = reason
	}
	s.emit("merge_group", p)
}

// queueRefusal is the 405 of a REST merge into a branch that requires a
// merge queue ("" when base has none).
func (r *repo) queueRefusal(base string) string {
	if r.mergeQueues[base] {
		return mergeQueueRefusal
	}
	return ""
}
