package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/flows"
	"changebot/flows/rules"
	"changebot/notify"
	"changebot/retention"
	"changebot/store"
)

// TestErrorTranslatesWhatTheAPITellsApart: each error of the engine and
// the store the API answers differently becomes api's (wrapped as the
// engine wraps them), keeping what the answer shows; anything else stays
// as it is.
func TestErrorTranslatesWhatTheAPITellsApart(t *testing.T) {
	t.Parallel()
	other := errors.New("connection reset")
	tests := []struct {
		name string
		err  error
		want func(error) bool
	}{
		{"nil", nil, func(e error) bool { return e == nil }},
		{"not found", fmt.Errorf("reading op_1: %w", store.ErrNotFound), func(e error) bool { return errors.Is(e, api.ErrNotFound) && errors.Is(e, store.ErrNotFound) }},
		{"overloaded", fmt.Errorf("admitting: %w", flows.ErrOverloaded), func(e error) bool { return errors.Is(e, api.ErrOverloaded) }},
		{"invalid", &flows.ValidationError{Fields: []flows.FieldError{{Field: "title", Message: "is empty"}}}, func(e error) bool {
			var v *api.ValidationError
			return errors.As(e, &v) && reflect.DeepEqual(v.Fields, []api.FieldError{{Field: "title", Message: "is empty"}})
		}},
		{"the platform's checks", fmt.Errorf("checking: %w", &flows.GitLabCheckError{Fields: []flows.FieldError{{Field: "target_branch", Message: "does not exist"}}}), func(e error) bool {
			var c *api.CheckError
			return errors.As(e, &c) && len(c.Fields) == 1 && c.Fields[0].Field == "target_branch"
		}},
		{"the platform down", &flows.GitLabUnavailableError{RetryAfter: 7 * time.Second, Err: other}, func(e error) bool {
			var u *api.UnavailableError
			return errors.As(e, &u) && u.RetryAfter == 7*time.Second && errors.Is(e, other)
		}},
		{"a key reused", &flows.IdempotencyConflictError{Key: "k", OperationID: "op_1", Fields: []string{"title"}}, func(e error) bool {
			var i *api.IdempotencyConflictError
			return errors.As(e, &i) && i.OperationID == "op_1" && reflect.DeepEqual(i.Fields, []string{"title"}) &&
				i.Message == (&flows.IdempotencyConflictError{Key: "k", OperationID: "op_1", Fields: []string{"title"}}).Error()
		}},
		{"the binding held by a failed change", fmt.Errorf("submitting: %w", &store.ActiveChangeError{SubjectID: "payments-api", TargetKey: "prod/us-west-2",
			OperationID: "op_2", Status: rules.StatusCreateFailed}), func(e error) bool {
			var h *api.BindingHeldError
			return errors.As(e, &h) && h.OperationID == "op_2" && h.Failed && h.Status == rules.StatusCreateFailed &&
				h.Reason == "payments-api / prod/us-west-2 already has a change that failed, op_2 (CREATE_FAILED): retry it or cancel it first"
		}},
		{"the binding held by an open change", &store.ActiveChangeError{SubjectID: "payments-api", TargetKey: "prod/us-west-2",
			OperationID: "op_3", Status: rules.StatusApprovalSent, MRIID: 6, Platform: store.PlatformGitLab}, func(e error) bool {
			var h *api.BindingHeldError
			return errors.As(e, &h) && !h.Failed &&
				h.Reason == "payments-api / prod/us-west-2 already has an open change op_3 (!6, APPROVAL_SENT): wait for it or cancel it"
		}},
		{"on GitHub", &store.ActiveChangeError{SubjectID: "s", TargetKey: "t", OperationID: "op_4", Status: rules.StatusMerging, MRIID: 9,
			Platform: store.PlatformGitHub}, func(e error) bool {
			var h *api.BindingHeldError
			return errors.As(e, &h) && h.Reason == "s / t already has an open change op_4 (#9, MERGING): wait for it or cancel it"
		}},
		{"not applicable passes", &rules.NotApplicableError{Reason: "nothing to retry"}, func(e error) bool {
			var n *rules.NotApplicableError
			return errors.As(e, &n) && n.Reason == "nothing to retry"
		}},
		{"not queued", fmt.Errorf("op_1 is at HANDLE_STARTED: %w", flows.ErrNotQueued), func(e error) bool {
			var n *api.NotQueuedError
			return errors.As(e, &n) && errors.Is(e, flows.ErrNotQueued)
		}},
		{"anything else", other, func(e error) bool { return errors.Is(e, other) && e.Error() == other.Error() }},
	}
	for _, tc := range tests {
		if got := Error(tc.err); !tc.want(got) {
			t.Errorf("%s: Error(%v) = %v (%T)", tc.name, tc.err, got, got)
		}
	}
}

// TestEventsKeepTheirJSON: an event as api answers it encodes as the
// store's does, field for field, and converts back unchanged.
func TestEventsKeepTheirJSON(t *testing.T) {
	t.Parallel()
	ev := store.Event{OperationID: "op_1", Seq: 3, Type: store.EventTransition, FromStep: 10401, ToStep: 10402,
		FromStatus: "APPROVAL_SENDING", ToStatus: "APPROVAL_SENT", Actor: "changebot", Source: "job:request_approval",
		Payload: json.RawMessage(`{"ticket_id":"T-1"}`), SchemaVersion: 2, OccurredAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
		PrevHash: "aa", Hash: "bb"}
	got := EventsOf([]store.Event{ev}, rules.PlatformGitLab)
	a, _ := json.Marshal(got[0])
	b, _ := json.Marshal(ev)
	if string(a) != string(b) {
		t.Errorf("api's event encodes as\n%s\nthe store's as\n%s", a, b)
	}
	if got[0].SourceWords == "" {
		t.Error("no source in words for the pages")
	}
	if back := storeEvents(got); !reflect.DeepEqual(back[0], ev) {
		t.Errorf("back %+v, want %+v", back[0], ev)
	}
}

// fakeClaims is the store's one-off claims (callback_requests) in memory;
// the change reads are not called.
type fakeClaims struct {
	ChangeReader
	rows map[[2]string]string
}

func (f *fakeClaims) DB() store.DBTX { return nil }

func (f *fakeClaims) InsertCallbackRequest(_ context.Context, _ store.DBTX, requestID, kind, _, result string) error {
	if _, ok := f.rows[[2]string{kind, requestID}]; ok {
		return store.ErrDuplicate
	}
	f.rows[[2]string{kind, requestID}] = result
	return nil
}

func (f *fakeClaims) CallbackResult(_ context.Context, _ store.DBTX, kind, requestID string) (string, error) {
	r, ok := f.rows[[2]string{kind, requestID}]
	if !ok {
		return "", store.ErrNotFound
	}
	return r, nil
}

// TestWebSessionRevocations: a logged-out session is a claim of kind
// api.SessionRevokedKind, read back by its nonce only; logging out twice
// is no error; and the retention keeps such a row (retention.MinMaxAge at
// least) longer than any session lasts (api.MaxSessionTTL), so a logout
// is never forgotten before its session expires.
func TestWebSessionRevocations(t *testing.T) {
	t.Parallel()
	if api.MaxSessionTTL >= retention.MinMaxAge {
		t.Fatalf("api.MaxSessionTTL %s is not under retention.MinMaxAge %s", api.MaxSessionTTL, retention.MinMaxAge)
	}
	claims := &fakeClaims{rows: map[[2]string]string{{"approval", "n1"}: "ACCEPTED"}}
	s := Store{Store: claims}
	ctx := t.Context()
	for _, step := range []struct {
		name, revoke, ask string
		want              bool
	}{
		{"nothing revoked", "", "n1", false},
		{"the revoked one", "n1", "n1", true},
		{"revoked twice", "n1", "n1", true},
		{"another nonce", "", "n2", false},
	} {
		if step.revoke != "" {
			if err := s.RevokeSession(ctx, step.revoke, "api:0123456789abcdef"); err != nil {
				t.Fatalf("%s: RevokeSession: %v", step.name, err)
			}
		}
		got, err := s.SessionRevoked(ctx, step.ask)
		if err != nil || got != step.want {
			t.Errorf("%s: SessionRevoked(%s) = %v, %v; want %v", step.name, step.ask, got, err, step.want)
		}
	}
	if claims.rows[[2]string{api.SessionRevokedKind, "n1"}] == "" {
		t.Errorf("claims %v: no %s row for the nonce", claims.rows, api.SessionRevokedKind)
	}
}

// fakeQueueEngine is the engine's merge queues in memory: queues by
// branch (all of project 101 but "other", of project 202), and the
// changes they name in ops; MoveToQueueFront refuses, as the engine
// does, a change that is not at HANDLE_QUEUED.
type fakeQueueEngine struct {
	queues map[string]store.Queue
	ops    map[string]store.Operation
	fronts []string
	frozen []string
}

func (f *fakeQueueEngine) DB() store.DBTX { return nil }

func (f *fakeQueueEngine) GetOperation(_ context.Context, _ store.DBTX, id string) (store.Operation, error) {
	op, ok := f.ops[id]
	if !ok {
		return store.Operation{}, fmt.Errorf("reading %s: %w", id, store.ErrNotFound)
	}
	return op, nil
}

func (f *fakeQueueEngine) Queue(_ context.Context, projectID int64, branch string) (flows.Queue, error) {
	q, ok := f.queues[branch]
	if !ok || q.Key.ProjectID != projectID {
		return flows.Queue{Queue: store.Queue{Key: store.QueueKey{ProjectID: projectID, TargetBranch: branch}}}, nil
	}
	out := flows.Queue{Queue: q}
	if op, ok := f.ops[q.HeadOperationID]; ok {
		out.Head = &op
	}
	return out, nil
}

func (f *fakeQueueEngine) Queues(context.Context) ([]store.QueueSummary, error) {
	var out []store.QueueSummary
	for _, b := range []string{"main", "other", "release", "staging"} {
		if q, ok := f.queues[b]; ok {
			n := len(q.Waiting)
			q.Waiting = nil
			out = append(out, store.QueueSummary{Queue: q, WaitingCount: n})
		}
	}
	return out, nil
}

func (f *fakeQueueEngine) FreezeQueue(_ context.Context, projectID int64, branch string, frozen bool, actor, reason string) (store.Queue, error) {
	f.frozen = append(f.frozen, fmt.Sprintf("%d:%s %v by %s: %s", projectID, branch, frozen, actor, reason))
	q := f.queues[branch]
	q.Key = store.QueueKey{ProjectID: projectID, TargetBranch: branch}
	q.FrozenAt, q.FrozenBy, q.FrozenReason = time.Time{}, "", ""
	if frozen {
		q.FrozenAt, q.FrozenBy, q.FrozenReason = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), actor, reason
	}
	f.queues[branch] = q
	return store.Queue{Key: q.Key, FrozenAt: q.FrozenAt, FrozenBy: q.FrozenBy, FrozenReason: q.FrozenReason}, nil
}

func (f *fakeQueueEngine) MoveToQueueFront(_ context.Context, op store.Operation, actor, reason string) error {
	if rules.StepCode(op.Step) != rules.HandleQueued {
		return fmt.Errorf("%s is at %s: %w", op.ID, rules.StepCode(op.Step), flows.ErrNotQueued)
	}
	f.fronts = append(f.fronts, op.ID+" by "+actor+": "+reason)
	return nil
}

// TestQueuesReadTheirChanges: a listed queue's project path and head's
// merge request come from its head's change, or for a queue without a
// head from its first waiting change (or another queue of the project);
// a queue frozen before anyone used it has no path. A freeze answers the
// queue read again with its waiting changes; a move to the front of a
// change that does not wait is an *api.NotQueuedError naming its step,
// of an unknown change api.ErrNotFound.
func TestQueuesReadTheirChanges(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	key := func(p int64, b string) store.QueueKey {
		return store.QueueKey{Platform: "gitlab", ProjectID: p, TargetBranch: b}
	}
	f := &fakeQueueEngine{
		ops: map[string]store.Operation{
			"op_h": {ID: "op_h", Project: "platform/config", ProjectID: 101, TargetBranch: "main", MRIID: 40, MRWebURL: "u40", Step: int(rules.HandleApproved)},
			"op_w": {ID: "op_w", Project: "platform/config", ProjectID: 101, TargetBranch: "main", MRIID: 41, Step: int(rules.HandleQueued)},
			"op_o": {ID: "op_o", Project: "team/app", ProjectID: 202, TargetBranch: "other", MRIID: 7, Step: int(rules.HandleQueued)},
		},
		queues: map[string]store.Queue{
			"main":    {Key: key(101, "main"), HeadOperationID: "op_h", HeadSince: at, Waiting: []store.QueuedOperation{{ID: "op_w", MRIID: 41, ReadyAt: at}}},
			"release": {Key: key(101, "release"), FrozenAt: at, FrozenBy: "olivia", FrozenReason: "freeze"},
			"other":   {Key: key(202, "other"), FrozenAt: at, FrozenBy: "olivia", Waiting: []store.QueuedOperation{{ID: "op_o", MRIID: 7, ReadyAt: at}}},
			"staging": {Key: key(303, "staging"), FrozenAt: at, FrozenBy: "olivia"},
		},
	}
	q := Queues{Flows: f, Store: f}
	ctx := t.Context()
	list, err := q.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, aq := range list {
		head := "-"
		if aq.Head != nil {
			head = fmt.Sprintf("%s !%d %s", aq.Head.OperationID, aq.Head.MRIID, aq.Head.MRWebURL)
		}
		got = append(got, fmt.Sprintf("%d %q %s head %s waiting %d frozen %v", aq.ProjectID, aq.Project, aq.TargetBranch, head, aq.WaitingCount, aq.Frozen()))
	}
	want := []string{
		`101 "platform/config" main head op_h !40 u40 waiting 1 frozen false`,
		`202 "team/app" other head - waiting 1 frozen true`,
		`101 "platform/config" release head - waiting 0 frozen true`,
		`303 "" staging head - waiting 0 frozen true`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ListQueues:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	one, err := q.FreezeQueue(ctx, 101, "main", true, "api:0123456789abcdef", "red")
	if err != nil || !one.Frozen() || one.FrozenBy != "api:0123456789abcdef" || len(one.Waiting) != 1 || one.Project != "platform/config" {
		t.Errorf("FreezeQueue = %+v, %v; want main frozen by the token with its waiting change", one, err)
	}
	if _, err := q.MoveToFront(ctx, "op_w", "api:0123456789abcdef", "hotfix"); err != nil || !reflect.DeepEqual(f.fronts, []string{"op_w by api:0123456789abcdef: hotfix"}) {
		t.Errorf("MoveToFront(op_w) = %v, fronts %v", err, f.fronts)
	}
	_, err = q.MoveToFront(ctx, "op_h", "api:0123456789abcdef", "")
	var nq *api.NotQueuedError
	if !errors.As(err, &nq) || nq.OperationID != "op_h" || nq.Step != "HANDLE_APPROVED" || !errors.Is(err, flows.ErrNotQueued) {
		t.Errorf("MoveToFront(op_h) = %v, want an *api.NotQueuedError at HANDLE_APPROVED", err)
	}
	if _, err := q.MoveToFront(ctx, "op_x", "api:0123456789abcdef", ""); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("MoveToFront(op_x) = %v, want api.ErrNotFound", err)
	}
}

// TestRolloutViewMergeRequestProject: a rollout's listed change shows its
// merge request with the project's id, as GET /api/v1/changes/{id} does.
func TestRolloutViewMergeRequestProject(t *testing.T) {
	t.Parallel()
	v := RolloutViewOf(notify.RolloutSummary{ID: "ro", Attention: []notify.RolloutChange{{OperationID: "op_1", ProjectID: 101,
		StepCode: int(rules.CreatePipelineFailed), MergeRequest: &notify.PayloadMR{IID: 12, WebURL: "https://gl/mr/12"}}}})
	if len(v.Attention) != 1 || v.Attention[0].MergeRequest == nil || v.Attention[0].MergeRequest.ProjectID != 101 || v.Attention[0].MergeRequest.IID != 12 {
		t.Fatalf("attention %+v, want merge request !12 of project 101", v.Attention)
	}
}
