package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"changebot/api"
	"changebot/flows"
	"changebot/flows/rules"
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
		{"the binding held by a failed change", fmt.Errorf("submitting: %w", &store.ActiveChangeError{OperationID: "op_2", Status: rules.StatusCreateFailed}), func(e error) bool {
			var h *api.BindingHeldError
			return errors.As(e, &h) && h.OperationID == "op_2" && h.Failed && h.Status == rules.StatusCreateFailed &&
				h.Reason == (&store.ActiveChangeError{OperationID: "op_2", Status: rules.StatusCreateFailed}).Reason()
		}},
		{"not applicable passes", &rules.NotApplicableError{Reason: "nothing to retry"}, func(e error) bool {
			var n *rules.NotApplicableError
			return errors.As(e, &n) && n.Reason == "nothing to retry"
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
