package api

import (
	"context"
	"encoding/json"
	"errors"
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

	"changebot/flows"
	"changebot/flows/rules"
	"changebot/settings"
	"changebot/store"
	"changebot/templates"
)

// fakeDB is the handle the fakes give out: they ignore it.
type fakeDB struct{}

func (fakeDB) Engine() string { return "fake" }

// fakeChanges holds changes and their events in memory and plays the
// flow engine (Engine) and the store's reads (Store) over them: Submit
// validates as the engine does (SubmitParams.Validate), answers the same
// Idempotency-Key with the change it created, refuses a binding another
// change holds, and records what it accepted; Act retries, resumes and
// cancels as the step table allows and records each call; ListChanges
// filters and pages as the store does. Err, when set, is what every call
// answers (an unreachable database or platform).
type fakeChanges struct {
	mu       sync.Mutex
	platform string
	now      time.Time
	ops      map[string]store.Operation
	events   map[string][]store.Event
	byKey    map[string]string
	nextID   int
	// submitErr is what Submit answers after validation (the platform's
	// checks refusing or unreachable, admission control).
	submitErr error
	err       error
	// submitted are the accepted submissions; acts the actions asked.
	submitted []flows.SubmitParams
	acts      []fakeAct
}

// fakeAct is one Act call.
type fakeAct struct {
	ID     string
	Action rules.Action
	Params rules.ActionParams
}

func newFakeChanges(platform string) *fakeChanges {
	return &fakeChanges{platform: platform, now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		ops: map[string]store.Operation{}, events: map[string][]store.Event{}, byKey: map[string]string{}}
}

// add stores op (its id given, or the next one) with a submitted event
// naming submittedBy, and returns its id.
func (f *fakeChanges) add(op store.Operation, submittedBy string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addLocked(op, submittedBy)
}

func (f *fakeChanges) addLocked(op store.Operation, submittedBy string) string {
	if op.ID == "" {
		f.nextID++
		op.ID = fmt.Sprintf("op_01FAKE%019d", f.nextID)
	}
	if op.Platform == "" {
		op.Platform = f.platform
	}
	if op.CreatedAt.IsZero() {
		op.CreatedAt, op.UpdatedAt, op.StepStartedAt = f.now, f.now, f.now
	}
	f.ops[op.ID] = op
	payload, _ := json.Marshal(map[string]string{"submitted_by": submittedBy})
	f.events[op.ID] = append(f.events[op.ID], store.Event{OperationID: op.ID, Seq: 1, Type: store.EventSubmitted,
		ToStep: op.Step, ToStatus: op.Status, Actor: "api", Source: "api", Payload: payload, OccurredAt: op.CreatedAt,
		SchemaVersion: store.EventSchemaVersion})
	return op.ID
}

func (f *fakeChanges) Platform() string { return f.platform }

func (f *fakeChanges) Submit(_ context.Context, p flows.SubmitParams) (store.Operation, bool, error) {
	if err := p.Validate(); err != nil {
		return store.Operation{}, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return store.Operation{}, false, f.err
	}
	if f.submitErr != nil {
		return store.Operation{}, false, f.submitErr
	}
	if id, ok := f.byKey[p.IdempotencyKey]; ok && p.IdempotencyKey != "" {
		return f.ops[id], false, nil
	}
	for _, op := range f.ops {
		if op.SubjectID == p.SubjectID && op.TargetKey == p.TargetKey && !store.IsReappliable(op.Status) {
			return store.Operation{}, false, &store.ActiveChangeError{OperationID: op.ID, Status: op.Status}
		}
	}
	f.submitted = append(f.submitted, p)
	op := store.Operation{SubjectID: p.SubjectID, TargetKey: p.TargetKey, Project: p.Project, Title: p.Title,
		RequestedBy: p.RequestedBy, Status: store.StatusApprovalSending, Step: int(rules.ApprovalSending)}
	id := f.addLocked(op, p.SubmittedBy)
	if p.IdempotencyKey != "" {
		f.byKey[p.IdempotencyKey] = id
	}
	return f.ops[id], true, nil
}

func (f *fakeChanges) Act(_ context.Context, id string, a rules.Action, p rules.ActionParams) (store.Operation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return store.Operation{}, f.err
	}
	op, ok := f.ops[id]
	if !ok {
		return store.Operation{}, store.ErrNotFound
	}
	f.acts = append(f.acts, fakeAct{ID: id, Action: a, Params: p})
	st := rules.MustStep(rules.StepCode(op.Step))
	switch {
	case a == rules.ActionRetry && st.Retryable():
		op.Step, op.Status = int(st.Retry), string(rules.MustStep(st.Retry).Status)
	case a == rules.ActionResume && st.Resumable():
		op.Step = int(st.Resume)
	case a == rules.ActionCancel && !st.Terminal:
		op.Step, op.Status = int(rules.Closed), store.StatusClosed
	default:
		return store.Operation{}, &rules.NotApplicableError{Reason: fmt.Sprintf("cannot %s a change at %s", a, st.Name)}
	}
	f.ops[id] = op
	return op, nil
}

func (f *fakeChanges) Get(_ context.Context, id string) (store.Operation, []store.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return store.Operation{}, nil, f.err
	}
	op, ok := f.ops[id]
	if !ok {
		return store.Operation{}, nil, store.ErrNotFound
	}
	return op, slices.Clone(f.events[id]), nil
}

// StatusView is the part of flows.Engine.StatusView the pages show: the
// step, its hint and the merge request.
func (f *fakeChanges) StatusView(op store.Operation, events []store.Event) templates.StatusView {
	st := rules.MustStep(rules.StepCode(op.Step))
	v := templates.StatusView{OperationID: op.ID, Title: op.Title, SubjectID: op.SubjectID, TargetKey: op.TargetKey,
		RequestedBy: op.RequestedBy, Status: op.Status, StepCode: op.Step, StepName: st.Name, Hint: st.HintOn(op.Platform),
		Terminal: st.Terminal, MR: templates.MRView{IID: op.MRIID, WebURL: op.MRWebURL}, Platform: store.PlatformOr(op.Platform)}
	for _, ev := range events {
		v.Seq = ev.Seq
		v.Timeline = append(v.Timeline, templates.TimelineEntry{At: ev.OccurredAt, StepName: rules.StepCode(ev.ToStep).String(),
			Status: ev.ToStatus, Actor: ev.Actor})
	}
	return v
}

func (f *fakeChanges) DB() store.DBTX { return fakeDB{} }

// ListChanges filters as the store does (every ListParams field), newest
// (highest id) first, at most p.Limit.
func (f *fakeChanges) ListChanges(_ context.Context, _ store.DBTX, p store.ListParams) ([]store.Operation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []store.Operation
	for _, op := range f.ops {
		stuck := slices.ContainsFunc(p.Stuck, func(b store.StuckBound) bool { return b.Step == op.Step && op.StepStartedAt.Before(b.StartedBefore) })
		switch {
		case len(p.Statuses) > 0 && !slices.Contains(p.Statuses, op.Status),
			len(p.Steps) > 0 && !slices.Contains(p.Steps, op.Step),
			p.Project != "" && op.Project != p.Project,
			p.SubjectID != "" && op.SubjectID != p.SubjectID,
			p.TargetKey != "" && op.TargetKey != p.TargetKey,
			p.RequestedBy != "" && op.RequestedBy != p.RequestedBy,
			!p.UpdatedAfter.IsZero() && !op.UpdatedAt.After(p.UpdatedAfter),
			!p.UpdatedBefore.IsZero() && !op.UpdatedAt.Before(p.UpdatedBefore),
			p.StuckOnly && !stuck,
			p.Before != "" && op.ID >= p.Before:
			continue
		}
		out = append(out, op)
	}
	slices.SortFunc(out, func(a, b store.Operation) int { return strings.Compare(b.ID, a.ID) })
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

func (f *fakeChanges) ReadHistory(_ context.Context, id string) (store.History, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return store.History{}, f.err
	}
	op, ok := f.ops[id]
	if !ok {
		return store.History{}, store.ErrNotFound
	}
	return store.History{Operation: op, Stored: slices.Clone(f.events[id])}, nil
}

// fakeSettingsStore keeps stored settings in memory for a real
// settings.Cache: SaveSetting runs the write's Check on the rows as stored,
// as both engines do under their settings lock, and stores or removes.
type fakeSettingsStore struct {
	mu   sync.Mutex
	rows []store.Setting
}

func (s *fakeSettingsStore) DB() store.DBTX { return fakeDB{} }

func (s *fakeSettingsStore) ListSettings(context.Context, store.DBTX) ([]store.Setting, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rows), nil
}

func (s *fakeSettingsStore) SaveSetting(_ context.Context, p store.SaveSettingParams) (store.Setting, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.Check != nil {
		if err := p.Check(slices.Clone(s.rows)); err != nil {
			return store.Setting{}, fmt.Errorf("checking setting %s: %w", p.Key, err)
		}
	}
	s.rows = slices.DeleteFunc(s.rows, func(r store.Setting) bool { return r.Key == p.Key && r.Scope == p.Scope })
	row := store.Setting{Key: p.Key, Scope: p.Scope, Value: p.Value, UpdatedBy: p.UpdatedBy, UpdatedAt: time.Now()}
	if p.Value != nil {
		s.rows = append(s.rows, row)
	}
	return row, nil
}

func (s *fakeSettingsStore) ListenSettings(context.Context) (store.SettingsListener, error) {
	return nil, errors.New("the fake settings store sends no notifications")
}

// Tokens of the tests' API, one per role, and a second submitter.
const (
	submitterToken = "tok-submitter"
	otherToken     = "tok-submitter-2"
	operatorToken  = "tok-operator"
	viewerToken    = "tok-viewer"
	externalURL    = "https://changebot.example"
)

// apiSetup is one Handler over fakes, served on an httptest server.
type apiSetup struct {
	changes  *fakeChanges
	settings *settings.Cache
	stored   *fakeSettingsStore
	refusals *CallbackRefusals
	srv      *httptest.Server
}

// setup serves a Handler over fresh fakes on platform (GitLab when "")
// until the test ends, mounted as bot mounts it: the API's fallback on the
// root router (beside a callback route of the root's own), every request's
// text checked first.
func setup(t *testing.T, platform string) *apiSetup {
	t.Helper()
	if platform == "" {
		platform = store.PlatformGitLab
	}
	s := &apiSetup{changes: newFakeChanges(platform), stored: &fakeSettingsStore{}}
	var err error
	s.settings, err = settings.NewCache(settings.CacheConfig{Store: s.stored})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.settings.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.refusals = NewCallbackRefusals(func() time.Time { return s.changes.now })
	h, err := New(Config{Engine: s.changes, Store: s.changes, Settings: s.settings, Refusals: s.refusals,
		Tokens: []Token{{Role: RoleSubmitter, Token: submitterToken}, {Role: RoleSubmitter, Token: otherToken},
			{Role: RoleOperator, Token: operatorToken}, {Role: RoleViewer, Token: viewerToken}},
		ExternalURL: externalURL, MaxBodyBytes: 1 << 20, NowFunc: func() time.Time { return s.changes.now }})
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
