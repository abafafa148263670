package demo

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"changebot/platform/approval/approvalfake"
	"changebot/platform/gitlab/gitlabfake"
)

// SwitchesPath is where the kept demo serves its switches, on the
// in-memory GitLab's address beside its note endpoint (/-/fake/…):
//
//	GET  /-/demo                      what is armed and what is held (JSON)
//	POST /-/demo/hold-approval        the approval system holds the next request
//	POST /-/demo/approve[?ticket=T-2] approve a held request (the oldest)
//	POST /-/demo/reject[?ticket=T-2]  reject it
//	POST /-/demo/fail-pipeline        the next merge request pipeline fails, once
//	POST /-/demo/conflict-rebase      the next merge finds its target moved and the rebase conflicts
//	POST /-/demo/resolve[?mr=2]       resolve that conflict: a new commit on the source branch
//	POST /-/demo/hang-rebase          the next merge finds its target moved and the rebase never ends
//	POST /-/demo/release[?mr=2]       let that rebase finish
//
// Each switch acts once, on the next change that gets there; the answers
// are JSON, 409 when there is nothing to approve, resolve or release.
const SwitchesPath = "/-/demo"

// approveDelay is how long the stand-in approval system takes to approve a
// request it does not hold.
const approveDelay = 300 * time.Millisecond

// Switches make the kept demo's in-memory GitLab and approval system go
// wrong on request (issue 23 point 6), through the fakes' own hooks:
// PipelineScript for a failing pipeline, a push to the target branch and
// a RebaseBehavior for a rebase that conflicts or hangs (both before the
// merge call, through SetBeforeCall), and an approval desk that decides
// the approval system's requests itself, holding those it is told to.
type Switches struct {
	gl        *gitlabfake.Server
	ap        *approvalfake.Server
	projectID int64
	pipelines time.Duration // the pipelines' duration (PipelineScript.Duration)

	mu         sync.Mutex
	holdNext   bool
	rebaseNext string   // "", "conflict" or "hang"
	seen       []string // tickets the desk has handled
	held       []approvalfake.Request
	conflicted []int64 // merge requests whose rebase conflicts
	hung       []int64 // merge requests whose rebase hangs
	// failAt is how many MR pipelines had run when FailNextPipeline was
	// called (-1: never): the switch is armed until another one starts.
	failAt int

	stop chan struct{}
	wg   sync.WaitGroup
}

// newSwitches starts the approval desk of ap (which must decide nothing by
// itself) for project projectID of gl; Close stops it.
func newSwitches(gl *gitlabfake.Server, ap *approvalfake.Server, projectID int64, pipelines time.Duration) *Switches {
	s := &Switches{gl: gl, ap: ap, projectID: projectID, pipelines: pipelines, failAt: -1, stop: make(chan struct{})}
	s.wg.Add(1)
	go s.desk()
	return s
}

// Close stops the approval desk and waits for the decisions it is sending.
func (s *Switches) Close() {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// desk looks at the approval system's requests every 50 ms: a new one is
// held when HoldNextApproval was called, else approved approveDelay later.
func (s *Switches) desk() {
	defer s.wg.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		for _, req := range s.ap.Requests() {
			s.mu.Lock()
			if slices.Contains(s.seen, req.TicketID) {
				s.mu.Unlock()
				continue
			}
			s.seen = append(s.seen, req.TicketID)
			hold := s.holdNext
			if hold {
				s.holdNext = false
				s.held = append(s.held, req)
			}
			s.mu.Unlock()
			if !hold {
				s.wg.Add(1)
				go s.approveLater(req)
			}
		}
	}
}

// approveLater approves req after approveDelay, unless the demo stops.
func (s *Switches) approveLater(req approvalfake.Request) {
	defer s.wg.Done()
	select {
	case <-s.stop:
		return
	case <-time.After(approveDelay):
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = s.ap.Decide(ctx, req, "approved", "req-"+req.TicketID)
}

// HoldNextApproval makes the approval system hold the next request it
// receives until Decide.
func (s *Switches) HoldNextApproval() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdNext = true
}

// Held lists the tickets of the held approval requests, oldest first.
func (s *Switches) Held() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.held {
		out = append(out, r.TicketID)
	}
	return out
}

// Decide sends decision ("approved" or "rejected") for the held request
// with ticket (the oldest when ""), and returns the ticket and the bot's
// answer; ok is false when no such request is held.
func (s *Switches) Decide(ctx context.Context, ticket, decision string) (string, string, bool, error) {
	s.mu.Lock()
	i := slices.IndexFunc(s.held, func(r approvalfake.Request) bool { return ticket == "" || r.TicketID == ticket })
	if i < 0 {
		s.mu.Unlock()
		return ticket, "", false, nil
	}
	req := s.held[i]
	s.held = slices.Delete(s.held, i, i+1)
	s.mu.Unlock()
	result, err := s.ap.Decide(ctx, req, decision, "demo-"+decision+"-"+req.TicketID)
	return req.TicketID, result, true, err
}

// FailNextPipeline makes the next merge request pipeline fail and the ones
// after it pass again, so that a /retry succeeds.
func (s *Switches) FailNextPipeline() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAt = s.gl.MRPipelineCount(s.projectID)
	s.gl.SetPipelineScript(s.projectID, gitlabfake.PipelineScript{MR: []string{"failed", "success"}, Duration: s.pipelines})
}

// ConflictNextRebase makes the next merge find its target branch moved
// (someone else's commit lands just before the merge call) and the rebase
// it then needs conflict, until Resolve.
func (s *Switches) ConflictNextRebase() { s.armRebase("conflict") }

// HangNextRebase is ConflictNextRebase with a rebase that never ends, until
// Release.
func (s *Switches) HangNextRebase() { s.armRebase("hang") }

func (s *Switches) armRebase(how string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rebaseNext = how
	s.gl.SetBeforeCall(s.beforeCall)
}

// beforeCall is the in-memory GitLab's hook while a rebase switch is
// armed: on the next merge call it moves the MR's target branch (under
// merge method ff, so that the MR needs a rebase) and scripts the MR's
// rebase, then disarms.
func (s *Switches) beforeCall(method, path string) {
	iid, ok := mergeCallIID(method, path)
	if !ok {
		return
	}
	s.mu.Lock()
	how := s.rebaseNext
	s.rebaseNext = ""
	switch how {
	case "conflict":
		s.conflicted = append(s.conflicted, iid)
	case "hang":
		s.hung = append(s.hung, iid)
	}
	s.mu.Unlock()
	if how == "" {
		return
	}
	s.gl.SetBeforeCall(nil)
	mr, ok := s.gl.MergeRequest(s.projectID, iid)
	if !ok {
		return
	}
	s.gl.SetMergeMethod(s.projectID, "ff")
	s.gl.SetRebaseBehavior(s.projectID, iid, gitlabfake.RebaseBehavior{Conflict: how == "conflict", StuckForever: how == "hang"})
	s.gl.PushToTarget(s.projectID, mr.TargetBranch)
}

// mergeCallIID is the merge request of a merge call
// (PUT /api/v4/projects/:id/merge_requests/:iid/merge).
func mergeCallIID(method, path string) (int64, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if method != http.MethodPut || len(segs) != 7 || segs[0] != "api" || segs[4] != "merge_requests" || segs[6] != "merge" {
		return 0, false
	}
	iid, err := strconv.ParseInt(segs[5], 10, 64)
	return iid, err == nil
}

// Resolve resolves the rebase conflict of merge request iid (the oldest
// one when 0): its rebase is no longer scripted to conflict and a
// developer pushes a commit to its source branch, which clears GitLab's
// conflict; a /retry then rebases and merges. false when none conflicts.
func (s *Switches) Resolve(iid int64) (int64, bool) {
	iid, ok := s.take(&s.conflicted, iid)
	if !ok {
		return iid, false
	}
	s.gl.SetRebaseBehavior(s.projectID, iid, gitlabfake.RebaseBehavior{})
	if mr, found := s.gl.MergeRequest(s.projectID, iid); found {
		s.gl.Push(s.projectID, mr.SourceBranch, Developer, "Resolve the rebase conflict", nil)
	}
	return iid, true
}

// Release lets the hung rebase of merge request iid (the oldest when 0)
// finish now; false when none hangs.
func (s *Switches) Release(iid int64) (int64, bool) {
	iid, ok := s.take(&s.hung, iid)
	if !ok {
		return iid, false
	}
	s.gl.SetRebaseBehavior(s.projectID, iid, gitlabfake.RebaseBehavior{})
	s.gl.FinishRebase(s.projectID, iid)
	return iid, true
}

// take removes iid (the oldest when 0) from list.
func (s *Switches) take(list *[]int64, iid int64) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(*list, func(n int64) bool { return iid == 0 || n == iid })
	if i < 0 {
		return iid, false
	}
	iid = (*list)[i]
	*list = slices.Delete(*list, i, i+1)
	return iid, true
}

// SwitchState is what GET /-/demo answers.
type SwitchState struct {
	// Armed names the switches waiting for their next change:
	// "hold-approval", "fail-pipeline", "conflict-rebase", "hang-rebase".
	Armed []string `json:"armed"`
	// HeldApprovals are the tickets held (approve or reject them).
	HeldApprovals []string `json:"held_approvals"`
	// ConflictedMRs and HungMRs are the merge requests whose rebase
	// conflicts (resolve) or hangs (release).
	ConflictedMRs []int64 `json:"conflicted_mrs"`
	HungMRs       []int64 `json:"hung_mrs"`
}

// State says what is armed and what is held.
func (s *Switches) State() SwitchState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SwitchState{Armed: []string{}, HeldApprovals: []string{}, ConflictedMRs: append([]int64{}, s.conflicted...), HungMRs: append([]int64{}, s.hung...)}
	if s.holdNext {
		st.Armed = append(st.Armed, "hold-approval")
	}
	if s.failAt >= 0 && s.gl.MRPipelineCount(s.projectID) == s.failAt {
		st.Armed = append(st.Armed, "fail-pipeline")
	}
	if s.rebaseNext != "" {
		st.Armed = append(st.Armed, s.rebaseNext+"-rebase")
	}
	for _, r := range s.held {
		st.HeldApprovals = append(st.HeldApprovals, r.TicketID)
	}
	return st
}

// ServeHTTP serves the switches under SwitchesPath (see there).
func (s *Switches) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	what := strings.Trim(strings.TrimPrefix(r.URL.Path, SwitchesPath), "/")
	if what == "" {
		if r.Method != http.MethodGet {
			reply(http.StatusMethodNotAllowed, map[string]string{"error": "GET " + SwitchesPath + " says what is armed; POST to its switches"})
			return
		}
		reply(http.StatusOK, s.State())
		return
	}
	if r.Method != http.MethodPost {
		reply(http.StatusMethodNotAllowed, map[string]string{"error": "use POST " + SwitchesPath + "/" + what})
		return
	}
	mr, err := strconv.ParseInt(cmp.Or(r.URL.Query().Get("mr"), "0"), 10, 64)
	if err != nil {
		reply(http.StatusBadRequest, map[string]string{"error": "mr must be a merge request number"})
		return
	}
	done := func(msg string) { reply(http.StatusOK, map[string]any{"ok": msg, "state": s.State()}) }
	none := func(msg string) { reply(http.StatusConflict, map[string]any{"error": msg, "state": s.State()}) }
	switch what {
	case "hold-approval":
		s.HoldNextApproval()
		done("the approval system holds the next request; approve it with POST " + SwitchesPath + "/approve or reject it with POST " + SwitchesPath + "/reject")
	case "approve", "reject":
		decision := map[string]string{"approve": "approved", "reject": "rejected"}[what]
		ticket, result, ok, err := s.Decide(r.Context(), r.URL.Query().Get("ticket"), decision)
		switch {
		case !ok && ticket != "":
			none("no approval request is held with ticket " + ticket)
		case !ok:
			none("no approval request is held; POST " + SwitchesPath + "/hold-approval holds the next one")
		case err != nil:
			reply(http.StatusBadGateway, map[string]any{"error": fmt.Sprintf("sending the decision on %s to the bot: %v", ticket, err), "result": result})
		default:
			reply(http.StatusOK, map[string]any{"ok": fmt.Sprintf("%s %s: the bot answered %s", ticket, decision, result), "state": s.State()})
		}
	case "fail-pipeline":
		s.FailNextPipeline()
		done("the next merge request pipeline fails, the ones after it pass: comment /retry on its merge request, or retry the change")
	case "conflict-rebase":
		s.ConflictNextRebase()
		done("the next merge finds its target branch moved and the rebase conflicts; POST " + SwitchesPath + "/resolve resolves it, then comment /retry")
	case "hang-rebase":
		s.HangNextRebase()
		done("the next merge finds its target branch moved and the rebase never ends; POST " + SwitchesPath + "/release lets it finish")
	case "resolve":
		if iid, ok := s.Resolve(mr); ok {
			done(fmt.Sprintf("!%d: the conflict is resolved by a new commit on its source branch; comment /retry on it", iid))
		} else {
			none("no merge request has a rebase conflict of the demo's; POST " + SwitchesPath + "/conflict-rebase makes the next one")
		}
	case "release":
		if iid, ok := s.Release(mr); ok {
			done(fmt.Sprintf("!%d: its rebase finishes now; a change parked meanwhile (HANDLE_REBASE_PENDING) needs /resume", iid))
		} else {
			none("no merge request has a hung rebase of the demo's; POST " + SwitchesPath + "/hang-rebase makes the next one")
		}
	default:
		reply(http.StatusNotFound, map[string]string{"error": "no switch " + what + "; GET " + SwitchesPath + " lists the state, the README and the demo's output the switches"})
	}
}

// withSwitches serves the switches under SwitchesPath and everything else
// with platform (the in-memory GitLab's handler).
func withSwitches(s *Switches, platform http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == SwitchesPath || strings.HasPrefix(r.URL.Path, SwitchesPath+"/") {
			s.ServeHTTP(w, r)
			return
		}
		platform.ServeHTTP(w, r)
	})
}

// addrListener names an address and accepts nothing until closed: the
// in-memory GitLab takes it for its own (its URL and web links name the
// address) while the demo serves the fake's handler, with the switches
// beside it, on the real listener.
type addrListener struct {
	addr net.Addr
	once sync.Once
	done chan struct{}
}

func newAddrListener(addr net.Addr) *addrListener {
	return &addrListener{addr: addr, done: make(chan struct{})}
}

// Accept implements net.Listener: it waits for Close.
func (l *addrListener) Accept() (net.Conn, error) {
	<-l.done
	return nil, net.ErrClosed
}

// Close implements net.Listener.
func (l *addrListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr implements net.Listener.
func (l *addrListener) Addr() net.Addr { return l.addr }
