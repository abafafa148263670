package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"changebot/flows/rules"
	"changebot/templates"
)

// fakeChanges holds changes and their events in memory and plays the
// flow engine (Engine) and the store's reads (Store) over them: Check and
// Submit refuse the fields problems names (the engine's own checks),
// Submit answers the same Idempotency-Key with the change it created,
// refuses a binding another change holds and records what it accepted;
// Act retries, resumes and cancels as the step table allows and records
// each call; ListChanges filters and pages as the store does. err, when
// set, is what every call answers (an unreachable database).
type fakeChanges struct {
	mu       sync.Mutex
	platform string
	now      time.Time
	ops      map[string]Change
	events   map[string][]Event
	byKey    map[string]string
	nextID   int
	// problems are the fields the engine's checks refuse, and why.
	problems map[string]string
	// submitErr is what Submit answers after the checks (the platform's
	// checks refusing or unreachable, admission control).
	submitErr error
	err       error
	// submitted are the accepted submissions; acts the actions asked.
	submitted []Submission
	acts      []fakeAct
	// revoked are the nonces of the logged-out web sessions, to the id of
	// their token.
	revoked map[string]string
	// lastDelivery and overviewBudget are what ReadOverview answers for
	// the last delivery and the budget left.
	lastDelivery   time.Time
	overviewBudget map[string]float64
	// lists counts the ListChanges calls.
	lists int
}

// fakeAct is one Act call.
type fakeAct struct {
	ID     string
	Action rules.Action
	Params rules.ActionParams
}

func newFakeChanges(platform string) *fakeChanges {
	return &fakeChanges{platform: platform, now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		ops: map[string]Change{}, events: map[string][]Event{}, byKey: map[string]string{}, problems: map[string]string{}}
}

// add stores c (its id given, or the next one) with a submitted event and
// returns its id.
func (f *fakeChanges) add(c Change) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addLocked(c)
}

func (f *fakeChanges) addLocked(c Change) string {
	if c.ID == "" {
		f.nextID++
		c.ID = fmt.Sprintf("op_01FAKE%019d", f.nextID)
	}
	if c.Platform == "" {
		c.Platform = f.platform
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt, c.UpdatedAt, c.StepStartedAt = f.now, f.now, f.now
	}
	f.ops[c.ID] = c
	payload, _ := json.Marshal(map[string]string{"submitted_by": c.SubmittedBy})
	f.events[c.ID] = append(f.events[c.ID], Event{OperationID: c.ID, Seq: 1, Type: "submitted", ToStep: c.Step, ToStatus: c.Status,
		Actor: "api", Source: "api", Payload: payload, OccurredAt: c.CreatedAt, SchemaVersion: 2, SourceWords: "the REST API"})
	return c.ID
}

func (f *fakeChanges) Platform() string { return f.platform }

func (f *fakeChanges) RevokeSession(_ context.Context, nonce, tokenID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if f.revoked == nil {
		f.revoked = map[string]string{}
	}
	f.revoked[nonce] = tokenID
	return nil
}

func (f *fakeChanges) SessionRevoked(_ context.Context, nonce string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return false, f.err
	}
	_, ok := f.revoked[nonce]
	return ok, nil
}

func (f *fakeChanges) Check(Submission) []FieldError {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []FieldError
	for field, msg := range f.problems {
		out = append(out, FieldError{Field: field, Message: msg})
	}
	slices.SortFunc(out, func(a, b FieldError) int { return strings.Compare(a.Field, b.Field) })
	return out
}

func (f *fakeChanges) Submit(_ context.Context, s Submission) (Change, bool, error) {
	if fields := f.Check(s); len(fields) > 0 {
		return Change{}, false, &ValidationError{Fields: fields}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return Change{}, false, f.err
	}
	if f.submitErr != nil {
		return Change{}, false, f.submitErr
	}
	if id, ok := f.byKey[s.IdempotencyKey]; ok && s.IdempotencyKey != "" {
		return f.ops[id], false, nil
	}
	for _, c := range f.ops {
		if c.SubjectID == s.SubjectID && c.TargetKey == s.TargetKey && !rules.Reappliable(c.Status) {
			return Change{}, false, &BindingHeldError{OperationID: c.ID, Status: c.Status, Failed: rules.Failed(c.Status),
				Reason: fmt.Sprintf("%s / %s already has an open change %s (%s): wait for it or cancel it", c.SubjectID, c.TargetKey, c.ID, c.Status)}
		}
	}
	f.submitted = append(f.submitted, s)
	id := f.addLocked(Change{SubjectID: s.SubjectID, TargetKey: s.TargetKey, Project: s.Project, Title: s.Title,
		RequestedBy: s.RequestedBy, Status: rules.StatusApprovalSending, Step: int(rules.ApprovalSending), SubmittedBy: s.SubmittedBy,
		RolloutID: s.RolloutID})
	if s.IdempotencyKey != "" {
		f.byKey[s.IdempotencyKey] = id
	}
	return f.ops[id], true, nil
}

func (f *fakeChanges) Act(_ context.Context, id string, a rules.Action, p rules.ActionParams) (Change, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return Change{}, f.err
	}
	c, ok := f.ops[id]
	if !ok {
		return Change{}, ErrNotFound
	}
	f.acts = append(f.acts, fakeAct{ID: id, Action: a, Params: p})
	st := rules.MustStep(rules.StepCode(c.Step))
	switch {
	case a == rules.ActionRetry && st.Retryable():
		c.Step, c.Status = int(st.Retry), rules.MustStep(st.Retry).Status
	case a == rules.ActionResume && st.Resumable():
		c.Step = int(st.Resume)
	case a == rules.ActionCancel && !st.Terminal:
		c.Step, c.Status = int(rules.Closed), rules.StatusClosed
	default:
		return Change{}, &rules.NotApplicableError{Reason: fmt.Sprintf("cannot %s a change at %s", a, st.Name)}
	}
	f.ops[id] = c
	return c, nil
}

func (f *fakeChanges) Get(_ context.Context, id string) (Change, []Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return Change{}, nil, f.err
	}
	c, ok := f.ops[id]
	if !ok {
		return Change{}, nil, ErrNotFound
	}
	return c, slices.Clone(f.events[id]), nil
}

// Page is Get with the part of the status view the pages show: the step,
// its hint, the merge request and the timeline.
func (f *fakeChanges) Page(ctx context.Context, id string) (Change, []Event, templates.StatusView, error) {
	c, events, err := f.Get(ctx, id)
	if err != nil {
		return Change{}, nil, templates.StatusView{}, err
	}
	st := rules.MustStep(rules.StepCode(c.Step))
	v := templates.StatusView{OperationID: c.ID, Title: c.Title, SubjectID: c.SubjectID, TargetKey: c.TargetKey,
		RequestedBy: c.RequestedBy, Status: c.Status, StepCode: c.Step, StepName: st.Name, Hint: st.HintOn(c.Platform),
		Terminal: st.Terminal, MR: templates.MRView{IID: c.MRIID, WebURL: c.MRWebURL}, Platform: c.Platform}
	for _, ev := range events {
		v.Seq = ev.Seq
		v.Timeline = append(v.Timeline, templates.TimelineEntry{At: ev.OccurredAt, StepName: rules.StepCode(ev.ToStep).String(),
			Status: ev.ToStatus, Actor: ev.Actor})
	}
	return c, events, v, nil
}

// Replay is the last event at or before at.
func (f *fakeChanges) Replay(events []Event, at time.Time) Replayed {
	var r Replayed
	for _, ev := range events {
		if !ev.OccurredAt.After(at) {
			r = Replayed{Seq: ev.Seq, Step: ev.ToStep, Status: ev.ToStatus}
		}
	}
	return r
}

// ListChanges filters as the store does (every ListParams field), newest
// (highest id) first, at most p.Limit; stuck means 24 hours in the step.
func (f *fakeChanges) ListChanges(_ context.Context, p ListParams) ([]Change, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.lists++
	var out []Change
	for _, c := range f.ops {
		switch {
		case len(p.Statuses) > 0 && !slices.Contains(p.Statuses, c.Status),
			len(p.Steps) > 0 && !slices.Contains(p.Steps, c.Step),
			p.Project != "" && c.Project != p.Project,
			p.SubjectID != "" && c.SubjectID != p.SubjectID,
			p.TargetKey != "" && c.TargetKey != p.TargetKey,
			p.RequestedBy != "" && c.RequestedBy != p.RequestedBy,
			p.RolloutID != "" && c.RolloutID != p.RolloutID,
			!p.UpdatedAfter.IsZero() && !c.UpdatedAt.After(p.UpdatedAfter),
			!p.UpdatedBefore.IsZero() && !c.UpdatedAt.Before(p.UpdatedBefore),
			!p.StuckAt.IsZero() && !c.StepStartedAt.Before(p.StuckAt.Add(-24*time.Hour)),
			p.Before != "" && c.ID >= p.Before:
			continue
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(b.ID, a.ID) })
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

func (f *fakeChanges) ReadHistory(_ context.Context, id string) (History, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return History{}, f.err
	}
	c, ok := f.ops[id]
	if !ok {
		return History{}, ErrNotFound
	}
	return History{Change: c, Stored: slices.Clone(f.events[id]), Current: slices.Clone(f.events[id])}, nil
}

// fakeSettings holds settings in memory: the registry's keys with their
// defaults, stored values per scope. Lookup and Set refuse an unknown key,
// and Set a value whose JSON type is not the default's, as the settings
// do (*RefusedError); it records every write.
type fakeSettings struct {
	mu       sync.Mutex
	defaults map[string]json.RawMessage
	stored   map[[2]string]SettingView
	writes   []SettingView
}

func newFakeSettings() *fakeSettings {
	return &fakeSettings{stored: map[[2]string]SettingView{}, defaults: map[string]json.RawMessage{
		"flow.approval_first": json.RawMessage(`true`), "pipeline.deadline": json.RawMessage(`"2h"`),
		"admission.max_active": json.RawMessage(`0`)}}
}

func scopeOf(project string) string {
	if project == "" {
		return "global"
	}
	return "project:" + strings.ToLower(project)
}

func (s *fakeSettings) lookupLocked(key, project string) (SettingView, error) {
	def, ok := s.defaults[key]
	if !ok {
		return SettingView{}, &RefusedError{Err: fmt.Errorf("unknown setting %q", key)}
	}
	if v, ok := s.stored[[2]string{key, scopeOf(project)}]; ok {
		return v, nil
	}
	if v, ok := s.stored[[2]string{key, "global"}]; ok {
		return v, nil
	}
	return SettingView{Key: key, Scope: "global", Value: def, Source: "default"}, nil
}

func (s *fakeSettings) List(project string) []SettingView {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SettingView
	for key := range s.defaults {
		v, _ := s.lookupLocked(key, project)
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b SettingView) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func (s *fakeSettings) Lookup(key, project string) (SettingView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookupLocked(key, project)
}

func (s *fakeSettings) Set(_ context.Context, key, project string, raw json.RawMessage, updatedBy string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	def, ok := s.defaults[key]
	if !ok {
		return "", &RefusedError{Err: fmt.Errorf("unknown setting %q", key)}
	}
	scope := scopeOf(project)
	if string(raw) == "null" {
		delete(s.stored, [2]string{key, scope})
		return scope, nil
	}
	var want, got any
	_ = json.Unmarshal(def, &want)
	if err := json.Unmarshal(raw, &got); err != nil || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
		return "", &RefusedError{Err: fmt.Errorf("invalid value for %s: want a %T", key, want)}
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	v := SettingView{Key: key, Scope: scope, Value: raw, UpdatedBy: updatedBy, UpdatedAt: &at, Source: "stored"}
	s.stored[[2]string{key, scope}] = v
	s.writes = append(s.writes, v)
	return scope, nil
}

// fakeQueues holds merge queues in memory, by project id and branch, and
// plays api.Queues over them: FreezeQueue keeps the first freeze as the
// store does and records every call; MoveToFront finds the change in
// changes (ErrNotFound), refuses one that is not at HANDLE_QUEUED or in no
// queue (*NotQueuedError) and moves it ahead of those nobody moved. err,
// when set, is what every call answers.
type fakeQueues struct {
	mu      sync.Mutex
	changes *fakeChanges
	now     time.Time
	queues  map[fakeQueueKey]Queue
	err     error
	// freezes and fronts are the calls that changed something, in order.
	freezes []fakeFreeze
	fronts  []fakeFront
}

// fakeQueueKey names a queue of fakeQueues.
type fakeQueueKey struct {
	project int64
	branch  string
}

// fakeFreeze is one FreezeQueue call; fakeFront one MoveToFront call.
type (
	fakeFreeze struct {
		ProjectID     int64
		Branch        string
		Frozen        bool
		Actor, Reason string
	}
	fakeFront struct{ ID, Actor, Reason string }
)

func newFakeQueues(changes *fakeChanges) *fakeQueues {
	return &fakeQueues{changes: changes, now: changes.now, queues: map[fakeQueueKey]Queue{}}
}

// put stores q under its project id and branch.
func (f *fakeQueues) put(q Queue) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queues[fakeQueueKey{q.ProjectID, q.TargetBranch}] = q
}

func (f *fakeQueues) getLocked(projectID int64, branch string) Queue {
	q, ok := f.queues[fakeQueueKey{projectID, branch}]
	if !ok {
		return Queue{ProjectID: projectID, TargetBranch: branch}
	}
	q.Waiting = slices.Clone(q.Waiting)
	q.WaitingCount = len(q.Waiting)
	return q
}

func (f *fakeQueues) ListQueues(context.Context) ([]Queue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []Queue
	for k := range f.queues {
		q := f.getLocked(k.project, k.branch)
		q.Waiting = nil
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b Queue) int {
		if a.ProjectID != b.ProjectID {
			return int(a.ProjectID - b.ProjectID)
		}
		return strings.Compare(a.TargetBranch, b.TargetBranch)
	})
	return out, nil
}

func (f *fakeQueues) Queue(_ context.Context, projectID int64, branch string) (Queue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return Queue{}, f.err
	}
	return f.getLocked(projectID, branch), nil
}

func (f *fakeQueues) FreezeQueue(_ context.Context, projectID int64, branch string, frozen bool, actor, reason string) (Queue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return Queue{}, f.err
	}
	f.freezes = append(f.freezes, fakeFreeze{ProjectID: projectID, Branch: branch, Frozen: frozen, Actor: actor, Reason: reason})
	q := f.getLocked(projectID, branch)
	switch {
	case frozen && q.Frozen():
	case frozen:
		q.FrozenAt, q.FrozenBy, q.FrozenReason = f.now, actor, reason
	default:
		q.FrozenAt, q.FrozenBy, q.FrozenReason = time.Time{}, "", ""
	}
	f.queues[fakeQueueKey{projectID, branch}] = q
	return f.getLocked(projectID, branch), nil
}

func (f *fakeQueues) MoveToFront(ctx context.Context, id, actor, reason string) (Queue, error) {
	c, _, err := f.changes.Get(ctx, id)
	if err != nil {
		return Queue{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return Queue{}, f.err
	}
	step := rules.StepCode(c.Step)
	if step != rules.HandleQueued {
		return Queue{}, &NotQueuedError{OperationID: id, Step: step.String()}
	}
	for k, q := range f.queues {
		i := slices.IndexFunc(q.Waiting, func(w QueuedChange) bool { return w.OperationID == id })
		if i < 0 {
			continue
		}
		f.fronts = append(f.fronts, fakeFront{ID: id, Actor: actor, Reason: reason})
		w := q.Waiting[i]
		w.FrontAt, w.FrontBy = f.now, actor
		rest := slices.Delete(slices.Clone(q.Waiting), i, i+1)
		at := slices.IndexFunc(rest, func(o QueuedChange) bool { return o.FrontAt.IsZero() })
		if at < 0 {
			at = len(rest)
		}
		q.Waiting = slices.Insert(rest, at, w)
		f.queues[k] = q
		return f.getLocked(k.project, k.branch), nil
	}
	return Queue{}, &NotQueuedError{OperationID: id}
}

// Tokens of the tests' API, one per role, and a second submitter.
const (
	submitterToken = "tok-submitter"
	otherToken     = "tok-submitter-2"
	operatorToken  = "tok-operator"
	viewerToken    = "tok-viewer"
	externalURL    = "https://changebot.example"
)

// fakeClock is the Handler's clock in tests; Add moves it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the clock's time.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock by d.
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// apiSetup is one Handler over fakes, served on an httptest server.
type apiSetup struct {
	// clock is the Handler's clock; it starts at the fakes' time.
	clock    *fakeClock
	changes  *fakeChanges
	settings *fakeSettings
	queues   *fakeQueues
	refusals *CallbackRefusals
	rollouts *fakeRollouts
	srv      *httptest.Server
}

// setup serves a Handler over fresh fakes on platform (GitLab when "")
// until the test ends, mounted as bot mounts it: the API's fallback on the
// root router (beside a callback route of the root's own), every request's
// text checked first.
func setup(t *testing.T, platform string) *apiSetup {
	t.Helper()
	if platform == "" {
		platform = rules.PlatformGitLab
	}
	s := &apiSetup{changes: newFakeChanges(platform), settings: newFakeSettings()}
	s.queues = newFakeQueues(s.changes)
	s.clock = &fakeClock{now: s.changes.now}
	s.refusals = NewCallbackRefusals(func() time.Time { return s.changes.now })
	s.rollouts = &fakeRollouts{views: map[string]RolloutView{}}
	h, err := New(Config{Engine: s.changes, Store: s.changes, Settings: s.settings, Queues: s.queues, Refusals: s.refusals, Rollouts: s.rollouts,
		Tokens: []Token{{Role: RoleSubmitter, Token: submitterToken}, {Role: RoleSubmitter, Token: otherToken},
			{Role: RoleOperator, Token: operatorToken}, {Role: RoleViewer, Token: viewerToken}},
		ExternalURL: externalURL, MaxBodyBytes: 1 << 20, NowFunc: s.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	r := mux.NewRouter()
	fallback := Fallback(r)
	r.NotFoundHandler, r.MethodNotAllowedHandler = fallback, fallback
	r.HandleFunc("/callbacks/approval", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }).Methods(http.MethodPost)
	h.Mount(r)
	s.srv = httptest.NewServer(TextInput(1<<20, false, r))
	t.Cleanup(s.srv.Close)
	return s
}

// call sends method path with body (none when "") as token's bearer (none
// when "") and returns the status and the body.
func (s *apiSetup) call(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	code, b, _ := s.callWith(t, method, path, token, body, nil)
	return code, b
}

// callWith is call with extra headers; it also returns the answer's
// headers.
func (s *apiSetup) callWith(t *testing.T, method, path, token, body string, header map[string]string) (int, string, http.Header) {
	t.Helper()
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	var req *http.Request
	var err error
	if rd != nil {
		req, err = http.NewRequest(method, s.srv.URL+path, rd)
	} else {
		req, err = http.NewRequest(method, s.srv.URL+path, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// ReadOverview counts the fake's changes as the store does: every status,
// and the active ones per project; no delivery, no failing job, budget
// left as set in overviewBudget.
func (f *fakeChanges) ReadOverview(_ context.Context, _ time.Time) (Overview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return Overview{}, f.err
	}
	var o Overview
	byStatus := map[string]int{}
	byProject := map[[2]string]int{}
	for _, c := range f.ops {
		byStatus[c.Status]++
		if !rules.Reappliable(c.Status) {
			byProject[[2]string{c.Project, c.Status}]++
		}
	}
	for _, st := range rules.Statuses() {
		o.ByStatus = append(o.ByStatus, StatusCount{Status: st, Count: byStatus[st]})
	}
	for k, n := range byProject {
		o.ByProject = append(o.ByProject, ProjectCount{Project: k[0], Status: k[1], Count: n})
	}
	slices.SortFunc(o.ByProject, func(a, b ProjectCount) int {
		return strings.Compare(a.Project+" "+a.Status, b.Project+" "+b.Status)
	})
	o.LastDeliveryAt, o.BudgetLeft = f.lastDelivery, f.overviewBudget
	return o, nil
}
