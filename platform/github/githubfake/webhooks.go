package githubfake

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1" // #nosec G505 -- the legacy X-Hub-Signature GitHub still sends
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Delivery is one webhook the server sent or dropped.
type Delivery struct {
	// GUID is X-GitHub-Delivery; a redelivery keeps it.
	GUID  string
	Event string
	// Action is the payload's action ("" for push and status).
	Action string
	Body   []byte
	// Status is the receiver's answer, 0 when dropped or unanswered.
	Status  int
	Dropped bool
}

type hookQueue struct {
	cond    *sync.Cond
	queue   []*Delivery
	sent    []*Delivery
	sending int
	senders int
	paused  bool
	chaos   WebhookChaos
	rng     *mrand.Rand
	wg      sync.WaitGroup
}

// WebhookChaos disturbs deliveries, as a busy GitHub and the network do:
// GitHub promises no order and does not redeliver by itself. Rates are
// probabilities in [0, 1] per event.
type WebhookChaos struct {
	// DuplicateRate: the event is sent twice with the same
	// X-GitHub-Delivery (a redelivery).
	DuplicateRate float64
	// ReorderRate: the next queued event overtakes this one.
	ReorderRate float64
	// DropRate: the event is never sent; it is recorded with Dropped.
	DropRate float64
	// Seed seeds the generator.
	Seed int64
}

// SetWebhookChaos sets the chaos for events not yet delivered; the zero
// value turns it off.
func (s *Server) SetWebhookChaos(c WebhookChaos) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.chaos = c
	s.hooks.rng = mrand.New(mrand.NewPCG(uint64(c.Seed), uint64(c.Seed)^0x9e3779b97f4a7c15)) // #nosec G115 G404 -- test chaos
}

// SetWebhookSenders delivers queued events with n concurrent senders (at
// least the one the server starts with), in no promised order, as
// GitHub's do.
func (s *Server) SetWebhookSenders(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.WebhookURL == "" || s.closed {
		return
	}
	for ; s.hooks.senders < n; s.hooks.senders++ {
		s.hooks.wg.Add(1)
		go s.sendHooks()
	}
}

// PauseWebhooks holds deliveries in the queue (events keep being queued),
// as when the receiver is down; ResumeWebhooks sends them.
func (s *Server) PauseWebhooks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.paused = true
}

// ResumeWebhooks restarts deliveries held by PauseWebhooks.
func (s *Server) ResumeWebhooks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.paused = false
	s.hooks.cond.Broadcast()
}

// chance reports true with probability p (chaos).
func (s *Server) chance(p float64) bool {
	return p > 0 && s.hooks.rng != nil && s.hooks.rng.Float64() < p
}

// SetDropWebhooks makes the server drop (record but not send) every
// delivery for which drop returns true; nil sends all. It models lost
// deliveries: GitHub does not redeliver by itself.
func (s *Server) SetDropWebhooks(drop func(event string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropHook = drop
}

// Webhooks returns every delivery so far, in order.
func (s *Server) Webhooks() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Delivery, 0, len(s.hooks.sent))
	for _, d := range s.hooks.sent {
		out = append(out, *d)
	}
	return out
}

// Redeliver sends the delivery guid again with the same X-GitHub-Delivery,
// as GitHub's "Redeliver" does.
func (s *Server) Redeliver(guid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.hooks.sent {
		if d.GUID == guid {
			s.enqueue(&Delivery{GUID: d.GUID, Event: d.Event, Action: d.Action, Body: d.Body})
			return true
		}
	}
	return false
}

func (s *Server) startHooks() {
	if s.opts.WebhookURL == "" {
		return
	}
	s.hooks.senders = 1
	s.hooks.wg.Add(1)
	go s.sendHooks()
}

// sendHooks delivers queued webhooks one at a time, in order.
func (s *Server) sendHooks() {
	defer s.hooks.wg.Done()
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		s.mu.Lock()
		for (len(s.hooks.queue) == 0 || s.hooks.paused) && !s.closed {
			s.hooks.cond.Wait()
		}
		if s.closed {
			s.mu.Unlock()
			return
		}
		i := 0
		if len(s.hooks.queue) > 1 && s.chance(s.hooks.chaos.ReorderRate) {
			i = 1 // the next one overtakes
		}
		d := s.hooks.queue[i]
		s.hooks.queue = append(s.hooks.queue[:i:i], s.hooks.queue[i+1:]...)
		s.hooks.sending++
		s.mu.Unlock()
		status := s.post(client, d)
		s.mu.Lock()
		d.Status = status
		s.hooks.sending--
		s.idle.Broadcast()
		s.mu.Unlock()
	}
}

// post sends one delivery with GitHub's headers (fixtures
// webhook-*.headers.json) and returns the answer's status.
func (s *Server) post(client *http.Client, d *Delivery) int {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, s.opts.WebhookURL, bytes.NewReader(d.Body))
	if err != nil {
		return 0
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/fake")
	h.Set("X-GitHub-Event", d.Event)
	h.Set("X-GitHub-Delivery", d.GUID)
	h.Set("X-GitHub-Hook-ID", "1")
	h.Set("X-GitHub-Hook-Installation-Target-ID", "1")
	h.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
	if sec := s.opts.WebhookSecret; sec != "" {
		m := hmac.New(sha256.New, []byte(sec))
		m.Write(d.Body)
		h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
		m1 := hmac.New(sha1.New, []byte(sec))
		m1.Write(d.Body)
		h.Set("X-Hub-Signature", "sha1="+hex.EncodeToString(m1.Sum(nil)))
	}
	resp, err := client.Do(req)
	if err != nil {
		s.log.Debug("webhook delivery failed", "event", d.Event, "err", err)
		return 0
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	return resp.StatusCode
}

func (s *Server) enqueue(d *Delivery) {
	s.hooks.sent = append(s.hooks.sent, d)
	if (s.dropHook != nil && s.dropHook(d.Event)) || s.chance(s.hooks.chaos.DropRate) {
		d.Dropped = true
		return
	}
	s.hooks.queue = append(s.hooks.queue, d)
	if s.chance(s.hooks.chaos.DuplicateRate) {
		dup := &Delivery{GUID: d.GUID, Event: d.Event, Action: d.Action, Body: d.Body}
		s.hooks.sent = append(s.hooks.sent, dup)
		s.hooks.queue = append(s.hooks.queue, dup)
	}
	s.hooks.cond.Broadcast()
}

// emit queues one event. Payloads are compact JSON, as GitHub sends them.
func (s *Server) emit(event string, payload map[string]any) {
	if s.opts.WebhookURL == "" {
		return
	}
	s.ids.delivery++
	body, err := json.Marshal(payload)
	if err != nil {
		return
	}
	action, _ := payload["action"].(string)
	guid := fmt.Sprintf("%08x-0000-4000-8000-%012x", s.ids.delivery, s.ids.delivery)
	s.enqueue(&Delivery{GUID: guid, Event: event, Action: action, Body: body})
}

func (s *Server) envelope(r *repo, by *user, action string) map[string]any {
	p := map[string]any{"repository": s.repoJSON(r), "sender": s.userJSON(by)}
	if action != "" {
		p["action"] = action
	}
	if by == nil {
		p["sender"] = s.ownerJSON(r)
	}
	return p
}

// emitPull sends pull_request (fixtures webhook-pull_request-*.json); extra
// adds top-level fields (before and after of synchronize).
func (s *Server) emitPull(r *repo, pr *pull, action string, by *user, extra map[string]any) {
	p := s.envelope(r, by, action)
	p["number"] = pr.number
	known := pr.mergeableKnown
	pr.mergeableKnown = false // a webhook carries mergeable null, as GitHub's do after a change
	p["pull_request"] = s.pullJSON(r, pr, true)
	pr.mergeableKnown = known && action != "synchronize" && action != "opened" && action != "reopened"
	for k, v := range extra {
		p[k] = v
	}
	s.emit("pull_request", p)
}

// emitReview sends pull_request_review (fixture
// webhook-pull_request_review-submitted-approved.json): review.state is
// lower case in webhooks.
func (s *Server) emitReview(r *repo, pr *pull, rv *review, action string) {
	p := s.envelope(r, rv.user, action)
	review := s.reviewJSON(r, pr, rv)
	review["state"] = map[string]string{"APPROVED": "approved", "CHANGES_REQUESTED": "changes_requested", "COMMENTED": "commented", "DISMISSED": "dismissed"}[rv.state]
	p["review"] = review
	p["pull_request"] = s.pullJSON(r, pr, false)
	s.emit("pull_request_review", p)
}

// emitComment sends issue_comment on a pull request (fixture
// webhook-issue_comment-created-pr.json): the issue carries
// pull_request links.
func (s *Server) emitComment(r *repo, pr *pull, c *comment, action string, changes map[string]any) {
	p := s.envelope(r, c.user, action)
	html := s.repoHTML(r) + "/pull/" + strconv.FormatInt(pr.number, 10)
	issueAPI := s.repoAPI(r) + "/issues/" + strconv.FormatInt(pr.number, 10)
	p["issue"] = map[string]any{
		"url": issueAPI, "repository_url": s.repoAPI(r), "labels_url": issueAPI + "/labels{/name}",
		"comments_url": issueAPI + "/comments", "events_url": issueAPI + "/events", "html_url": html,
		"id": pr.id, "node_id": nodeID("I_", pr.id), "number": pr.number, "title": pr.title, "user": s.userJSON(pr.author),
		"labels": []any{}, "state": pr.state, "locked": false, "assignee": nil, "assignees": []any{}, "milestone": nil,
		"comments": len(r.sortedComments(pr.number)), "created_at": ts(pr.created), "updated_at": ts(pr.updated),
		"closed_at": ts(pr.closedAt), "author_association": "MEMBER", "active_lock_reason": nil, "body": pr.body,
		"performed_via_github_app": nil,
		"pull_request": map[string]any{"url": s.repoAPI(r) + "/pulls/" + strconv.FormatInt(pr.number, 10), "html_url": html,
			"diff_url": html + ".diff", "patch_url": html + ".patch", "merged_at": ts(pr.mergedAt)},
	}
	p["comment"] = s.commentJSON(r, c)
	if changes != nil {
		p["changes"] = changes
	}
	s.emit("issue_comment", p)
}

// emitCheckRun sends check_run (fixture webhook-check_run-completed.json).
func (s *Server) emitCheckRun(r *repo, c *checkRun) {
	action := "created"
	if c.status == "completed" {
		action = "completed"
	}
	p := s.envelope(r, nil, action)
	cr := s.checkRunJSON(r, c)
	status, conclusion := "in_progress", any(nil)
	if c.status == "completed" {
		status, conclusion = "completed", c.conclusion
	}
	cr["check_suite"] = s.suiteJSON(r, c.suite, c.sha, s.branchOf(r, c.sha), status, conclusion, c.started, c.completed)
	p["check_run"] = cr
	s.emit("check_run", p)
}

// branchOf names a branch whose tip is sha, or whose run it was.
func (s *Server) branchOf(r *repo, sha string) any {
	for _, run := range r.runs {
		if run.sha == sha {
			return run.branch
		}
	}
	for b, tip := range r.refs {
		if tip == sha {
			return b
		}
	}
	return nil
}

// emitCheckSuite sends check_suite completed for a workflow run (fixture
// webhook-check_suite-completed.json).
func (s *Server) emitCheckSuite(r *repo, run *workflowRun) {
	p := s.envelope(r, nil, "completed")
	suite := s.suiteJSON(r, run.suite, run.sha, run.branch, "completed", run.conclusion, run.created, run.updated)
	suite["latest_check_runs_count"] = len(run.jobs)
	suite["head_commit"] = s.workflowRunJSON(r, run)["head_commit"]
	p["check_suite"] = suite
	s.emit("check_suite", p)
}

// emitWorkflowRun sends workflow_run (fixture
// webhook-workflow_run-completed.json).
func (s *Server) emitWorkflowRun(r *repo, run *workflowRun, action string) {
	p := s.envelope(r, nil, action)
	p["workflow_run"] = s.workflowRunJSON(r, run)
	p["workflow"] = map[string]any{"id": 1, "node_id": "W_1", "name": "CI", "path": ".github/workflows/ci.yml", "state": "active",
		"url": s.repoAPI(r) + "/actions/workflows/1", "html_url": s.repoHTML(r) + "/actions/workflows/ci.yml", "badge_url": s.repoHTML(r) + "/workflows/CI/badge.svg",
		"created_at": ts(r.created), "updated_at": ts(r.created)}
	s.emit("workflow_run", p)
}

// emitStatus sends status (fixtures webhook-status-*.json): no action.
func (s *Server) emitStatus(r *repo, st *status) {
	p := s.envelope(r, nil, "")
	for k, v := range s.statusJSON(r, st) {
		p[k] = v
	}
	p["sha"] = st.sha
	p["name"] = r.FullName
	var branches []any
	for b, tip := range r.refs {
		if tip == st.sha {
			branches = append(branches, map[string]any{"name": b, "commit": map[string]any{"sha": tip, "url": s.repoAPI(r) + "/commits/" + tip}, "protected": b == r.DefaultBranch})
		}
	}
	p["branches"] = append([]any{}, branches...)
	if c := s.objects.commits[st.sha]; c != nil {
		p["commit"] = s.commitJSON(r, c)
	}
	s.emit("status", p)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// emitPush sends push (fixture webhook-push-default-branch.json).
func (s *Server) emitPush(r *repo, branch, before, after string, by *user) {
	if before == "" {
		before = "0000000000000000000000000000000000000000"
	}
	p := s.envelope(r, by, "")
	// The push payload's repository has a few fields of its own, and its
	// created_at and pushed_at are Unix seconds, not the REST API's
	// timestamps (fixture webhook-push-default-branch.json).
	repo := p["repository"].(map[string]any)
	repo["main_branch"], repo["stargazers"] = r.DefaultBranch, 0
	repo["created_at"], repo["pushed_at"] = r.created.Unix(), s.now().Unix()
	owner := repo["owner"].(map[string]any)
	owner["name"], owner["email"] = r.Owner, nil
	p["ref"] = "refs/heads/" + branch
	p["before"], p["after"] = before, after
	p["created"], p["deleted"], p["forced"] = before == "0000000000000000000000000000000000000000", false, false
	p["base_ref"] = nil
	p["compare"] = s.repoHTML(r) + "/compare/" + before[:12] + "..." + after[:12]
	login := ""
	if by != nil {
		login = by.Login
	}
	p["pusher"] = map[string]any{"name": login, "email": login + "@users.noreply.fake"}
	if c := s.objects.commits[after]; c != nil {
		hc := map[string]any{"id": c.sha, "tree_id": c.tree, "distinct": true, "message": c.message, "timestamp": ts(c.date),
			"url": s.repoHTML(r) + "/commit/" + c.sha, "author": map[string]any{"name": c.author, "email": c.author + "@users.noreply.fake", "username": c.author},
			"committer": map[string]any{"name": c.author, "email": c.author + "@users.noreply.fake", "username": c.author},
			"added":     []any{}, "removed": []any{}, "modified": []any{}}
		if parent := s.objects.commits[before]; parent != nil {
			old, cur := s.objects.trees[parent.tree], s.objects.trees[c.tree]
			for _, path := range sortedKeys(union(old, cur)) {
				switch o, ok := old[path]; {
				case !ok:
					hc["added"] = append(hc["added"].([]any), path)
				case cur[path] == "":
					hc["removed"] = append(hc["removed"].([]any), path)
				case cur[path] != o:
					hc["modified"] = append(hc["modified"].([]any), path)
				}
			}
		}
		p["head_commit"] = hc
		p["commits"] = []any{hc}
	}
	s.emit("push", p)
}
