package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"changebot/flows/rules"
	"changebot/internal/guard"
)

const callbackSecret = "callback-secret-0123456789"

// fakeAcceptor is a hand-written ApprovalAcceptor and DeployAcceptor that
// records every call and answers result (or err).
type fakeAcceptor struct {
	mu        sync.Mutex
	approvals []ApprovalCallback
	deploys   []DeployCallback
	result    string
	err       error
}

func (a *fakeAcceptor) AcceptApproval(_ context.Context, cb ApprovalCallback) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.approvals = append(a.approvals, cb)
	return a.result, a.err
}

func (a *fakeAcceptor) AcceptDeploy(_ context.Context, cb DeployCallback) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.deploys = append(a.deploys, cb)
	return a.result, a.err
}

func (a *fakeAcceptor) calls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.approvals) + len(a.deploys)
}

// callbackEnv is the shared fixture of the callback tests.
type callbackEnv struct {
	approval, deploy http.Handler
	acc              *fakeAcceptor
	m                *Metrics
	logs             *logBuffer
}

func setupCallbacks(t *testing.T, acc *fakeAcceptor) *callbackEnv {
	t.Helper()
	log, logs := newLogger(t)
	e := &callbackEnv{acc: acc, m: NewMetrics(prometheus.NewRegistry()), logs: logs}
	cfg := CallbackConfig{Secret: callbackSecret, MaxBodyBytes: 4 << 10, Approvals: acc, Deploys: acc, Logger: log, Metrics: e.m}
	var err error
	if e.approval, err = NewApprovalCallbackHandler(cfg); err != nil {
		t.Fatal(err)
	}
	if e.deploy, err = NewDeployCallbackHandler(cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

// signedAt is the HeaderTimestamp the tests' callbacks carry: now, within
// the handlers' tolerance of their real clock.
var signedAt = time.Now().Unix()

// sign is Sign at signedAt.
func sign(secret string, body []byte) string { return Sign(secret, signedAt, body) }

// callback posts body with signature (none when empty), signed at signedAt.
func callback(h http.Handler, method, signature string, body []byte) *httptest.ResponseRecorder {
	return callbackAt(h, method, strconv.FormatInt(signedAt, 10), signature, body)
}

// callbackAt posts body with the timestamp and signature headers given
// (none when empty).
func callbackAt(h http.Handler, method, timestamp, signature string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "/callbacks/x", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if timestamp != "" {
		r.Header.Set(HeaderTimestamp, timestamp)
	}
	if signature != "" {
		r.Header.Set(HeaderSignature, signature)
	}
	w := httptest.NewRecorder()
	guarded(h).ServeHTTP(w, r)
	return w
}

func TestSign(t *testing.T) {
	t.Parallel()
	// RFC 4231-style check against a well-known HMAC-SHA256 vector.
	// HMAC-SHA256("key", "1700000000.The quick brown fox …"), computed
	// apart (Python's hmac module).
	got := Sign("key", 1700000000, []byte("The quick brown fox jumps over the lazy dog"))
	want := "sha256=2f658d6aef4f246e91cd741bbcded7479e9605f9d41c9e248122a117e0e1765b"
	if got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

func TestApprovalCallback(t *testing.T) {
	t.Parallel()
	good := []byte(`{"request_id":"req-1","operation_id":"op_01J","ticket_id":"T-7","decision":"approved","approver":"alice","ext":{"mr_iid":7},"future_field":true}`)
	tampered := bytes.Replace(good, []byte(`"approved"`), []byte(`"rejected"`), 1)
	tests := []struct {
		name       string
		method     string
		body       []byte
		signature  string // default: sign(callbackSecret, body)
		result     string // acceptor answer
		accErr     error
		wantStatus int
		wantBody   string
		wantCall   *ApprovalCallback
		wantLabel  string
	}{
		{
			name: "good signature", body: good, result: rules.ResultAccepted,
			wantStatus: 200, wantBody: `{"result":"ACCEPTED"}`, wantLabel: rules.ResultAccepted,
			wantCall: &ApprovalCallback{RequestID: "req-1", OperationID: "op_01J", TicketID: "T-7", Decision: "approved", Approver: "alice", Ext: map[string]any{"mr_iid": 7.0}},
		},
		{name: "duplicate passed through", body: good, result: rules.ResultDuplicate, wantStatus: 200, wantBody: `{"result":"DUPLICATE"}`, wantLabel: rules.ResultDuplicate},
		{name: "stale passed through", body: good, result: rules.ResultIgnoredStale, wantStatus: 200, wantBody: `{"result":"IGNORED_STALE"}`, wantLabel: rules.ResultIgnoredStale},
		{name: "unknown passed through", body: good, result: rules.ResultIgnoredUnknown, wantStatus: 200, wantBody: `{"result":"IGNORED_UNKNOWN"}`, wantLabel: rules.ResultIgnoredUnknown},
		{name: "failed recorded passed through", body: good, result: rules.ResultFailedRecorded, wantStatus: 200, wantBody: `{"result":"FAILED_RECORDED"}`, wantLabel: rules.ResultFailedRecorded},
		{name: "unexpected result passed through, counted as other", body: good, result: "SOMETHING_NEW", wantStatus: 200, wantBody: `{"result":"SOMETHING_NEW"}`, wantLabel: ResultOther},
		{name: "bad signature", body: good, signature: sign("other-secret", good), wantStatus: 401, wantBody: `{"error":"invalid signature"}`, wantLabel: ResultUnauthorized},
		{name: "missing signature", body: good, signature: "-", wantStatus: 401, wantBody: `{"error":"invalid signature"}`, wantLabel: ResultUnauthorized},
		{name: "signature without prefix", body: good, signature: strings.TrimPrefix(sign(callbackSecret, good), "sha256="), wantStatus: 401, wantBody: `{"error":"invalid signature"}`, wantLabel: ResultUnauthorized},
		{
			name: "signature in uppercase hex", body: good, signature: "sha256=" + strings.ToUpper(strings.TrimPrefix(sign(callbackSecret, good), "sha256=")),
			result: rules.ResultAccepted, wantStatus: 200, wantBody: `{"result":"ACCEPTED"}`, wantLabel: rules.ResultAccepted,
		},
		{name: "signature not hex", body: good, signature: "sha256=zz", wantStatus: 401, wantBody: `{"error":"invalid signature"}`, wantLabel: ResultUnauthorized},
		{name: "tampered body", body: tampered, signature: sign(callbackSecret, good), wantStatus: 401, wantBody: `{"error":"invalid signature"}`, wantLabel: ResultUnauthorized},
		{
			name: "missing fields", body: []byte(`{"ticket_id":"T-7"}`), wantStatus: 400, wantLabel: ResultInvalid,
			wantBody: `{"error":"invalid approval callback","fields":[{"field":"request_id","message":"required"},{"field":"operation_id","message":"required"},{"field":"decision","message":"required"}]}`,
		},
		{
			name: "unknown decision", body: []byte(`{"request_id":"r","operation_id":"op","decision":"maybe"}`), wantStatus: 400, wantLabel: ResultInvalid,
			wantBody: `{"error":"invalid approval callback","fields":[{"field":"decision","message":"must be one of approved, rejected, withdrawn"}]}`,
		},
		{
			name: "request_id too long", body: []byte(`{"request_id":"` + strings.Repeat("r", 201) + `","operation_id":"op","decision":"withdrawn"}`), wantStatus: 400, wantLabel: ResultInvalid,
			wantBody: `{"error":"invalid approval callback","fields":[{"field":"request_id","message":"longer than 200 bytes"}]}`,
		},
		{
			name: "approved by nobody", body: []byte(`{"request_id":"r","operation_id":"op","decision":"approved","approver":""}`), wantStatus: 400, wantLabel: ResultInvalid,
			wantBody: `{"error":"invalid approval callback","fields":[{"field":"approver","message":"required when decision is approved"}]}`,
		},
		{
			name: "rejected without approver", body: []byte(`{"request_id":"r","operation_id":"op","decision":"rejected","approver":"  "}`), wantStatus: 400, wantLabel: ResultInvalid,
			wantBody: `{"error":"invalid approval callback","fields":[{"field":"approver","message":"required when decision is rejected"}]}`,
		},
		{
			name: "approver with a bidi override", body: []byte(`{"request_id":"r","operation_id":"op","decision":"approved","approver":"eve\u202eyrrac"}`), wantStatus: 400, wantLabel: ResultInvalid,
			wantBody: `{"error":"invalid approval callback","fields":[{"field":"approver","message":"contains a bidirectional formatting character (U+202E)"}]}`,
		},
		{
			name: "approver with a newline", body: []byte(`{"request_id":"r","operation_id":"op","decision":"approved","approver":"carol\nby bob"}`), wantStatus: 400, wantLabel: ResultInvalid,
			wantBody: `{"error":"invalid approval callback","fields":[{"field":"approver","message":"contains a control character (U+000A)"}]}`,
		},
		{
			name: "withdrawn needs no approver", body: []byte(`{"request_id":"r","operation_id":"op","decision":"withdrawn"}`), result: rules.ResultAccepted,
			wantStatus: 200, wantBody: `{"result":"ACCEPTED"}`, wantLabel: rules.ResultAccepted,
			wantCall: &ApprovalCallback{RequestID: "r", OperationID: "op", Decision: "withdrawn"},
		},
		{name: "wrong JSON type", body: []byte(`{"request_id":"r","operation_id":"op","decision":5}`), wantStatus: 400, wantLabel: ResultMalformed, wantBody: `{"error":"malformed payload: field decision must be a string, not a number"}`},
		{name: "duplicate key", body: []byte(`{"request_id":"r","operation_id":"op","decision":"rejected","decision":"approved","approver":"carol"}`), wantStatus: 400,
			wantLabel: ResultMalformed, wantBody: `{"error":"malformed payload: duplicate key decision: every key may appear once"}`},
		{name: "duplicate key in ext", body: []byte(`{"request_id":"r","operation_id":"op","decision":"approved","approver":"carol","ext":{"a":[{"k":1,"k":2}]}}`), wantStatus: 400,
			wantLabel: ResultMalformed, wantBody: `{"error":"malformed payload: duplicate key ext.a[0].k: every key may appear once"}`},
		{name: "not JSON", body: []byte(`decision=approved`), wantStatus: 400, wantLabel: ResultMalformed, wantBody: `{"error":"malformed payload: body is not a JSON object"}`},
		{name: "trailing data", body: []byte(`{"request_id":"r","operation_id":"op","decision":"approved"} {}`), wantStatus: 400, wantLabel: ResultMalformed, wantBody: `{"error":"malformed payload: data after the JSON value"}`},
		{name: "too large", body: []byte(`{"request_id":"` + strings.Repeat("r", 5<<10) + `"}`), wantStatus: 413, wantLabel: ResultTooLarge, wantBody: `{"error":"payload larger than 4096 bytes"}`},
		{name: "acceptor error", body: good, accErr: errStore, wantStatus: 503, wantLabel: ResultError, wantBody: `{"error":"applying the callback failed; send it again"}`},
		{name: "wrong method", method: http.MethodGet, body: good, wantStatus: 405, wantLabel: ResultMalformed, wantBody: `{"error":"method not allowed, use POST"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			acc := &fakeAcceptor{result: tt.result, err: tt.accErr}
			e := setupCallbacks(t, acc)
			sig := tt.signature
			switch sig {
			case "":
				sig = sign(callbackSecret, tt.body)
			case "-":
				sig = ""
			}
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			w := callback(e.approval, method, sig, tt.body)
			if got := strings.TrimSpace(w.Body.String()); w.Code != tt.wantStatus || got != tt.wantBody {
				t.Errorf("answer %d %s, want %d %s", w.Code, got, tt.wantStatus, tt.wantBody)
			}
			reachedAcceptor := tt.wantStatus == 200 || tt.wantStatus == 503
			if n := acc.calls(); reachedAcceptor && n != 1 || !reachedAcceptor && n != 0 {
				t.Errorf("acceptor called %d times", n)
			}
			if tt.wantCall != nil && !reflect.DeepEqual(acc.approvals[0], *tt.wantCall) {
				t.Errorf("acceptor got %+v, want %+v", acc.approvals[0], *tt.wantCall)
			}
			if got := testutil.ToFloat64(e.m.callbacks.WithLabelValues(KindApproval, tt.wantLabel)); got != 1 {
				t.Errorf("callbacks{kind=approval,result=%s} = %v, want 1", tt.wantLabel, got)
			}
			if strings.Contains(e.logs.String(), callbackSecret) || strings.Contains(e.logs.String(), sig) && sig != "" {
				t.Errorf("logs contain the secret or the signature")
			}
		})
	}
}

func TestDeployCallback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantBody   string
		wantCall   *DeployCallback
	}{
		{
			name:       "success",
			body:       `{"request_id":"d-1","project_id":42,"mr_iid":7,"merge_commit_sha":"43411b53d670203e887c4985c4e58e8e6b7c109e","status":"success"}`,
			wantStatus: 200, wantBody: `{"result":"ACCEPTED"}`,
			wantCall: &DeployCallback{RequestID: "d-1", ProjectID: 42, MRIID: 7, MergeCommitSHA: "43411b53d670203e887c4985c4e58e8e6b7c109e", Status: "success"},
		},
		{
			name:       "applied without merge commit",
			body:       `{"request_id":"d-2","project_id":42,"mr_iid":7,"status":"applied"}`,
			wantStatus: 200, wantBody: `{"result":"ACCEPTED"}`,
			wantCall: &DeployCallback{RequestID: "d-2", ProjectID: 42, MRIID: 7, Status: "applied"},
		},
		{
			name:       "every field wrong",
			body:       `{"project_id":-1,"merge_commit_sha":"not-a-sha","status":"running"}`,
			wantStatus: 400,
			wantBody: `{"error":"invalid deploy callback","fields":[{"field":"request_id","message":"required"},` +
				`{"field":"project_id","message":"required, a positive integer"},{"field":"mr_iid","message":"required, a positive integer"},` +
				`{"field":"merge_commit_sha","message":"must be a commit sha (7 to 64 hex digits)"},` +
				`{"field":"status","message":"must be one of success, applied, failed"}]}`,
		},
		{
			name:       "project id as string",
			body:       `{"request_id":"d-3","project_id":"42","mr_iid":7,"status":"success"}`,
			wantStatus: 400, wantBody: `{"error":"malformed payload: field project_id must be an integer, not a string"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			acc := &fakeAcceptor{result: rules.ResultAccepted}
			e := setupCallbacks(t, acc)
			body := []byte(tt.body)
			w := callback(e.deploy, http.MethodPost, sign(callbackSecret, body), body)
			if got := strings.TrimSpace(w.Body.String()); w.Code != tt.wantStatus || got != tt.wantBody {
				t.Errorf("answer %d %s\nwant %d %s", w.Code, got, tt.wantStatus, tt.wantBody)
			}
			switch {
			case tt.wantCall == nil && acc.calls() != 0:
				t.Errorf("acceptor called for an invalid callback")
			case tt.wantCall != nil && (len(acc.deploys) != 1 || !reflect.DeepEqual(acc.deploys[0], *tt.wantCall)):
				t.Errorf("acceptor got %+v, want %+v", acc.deploys, *tt.wantCall)
			}
		})
	}
	// A bad signature reaches nothing, and is counted under deploy.
	e := setupCallbacks(t, &fakeAcceptor{})
	body := []byte(`{"request_id":"d-1","project_id":42,"mr_iid":7,"status":"success"}`)
	if w := callback(e.deploy, http.MethodPost, sign("wrong", body), body); w.Code != 401 || e.acc.calls() != 0 {
		t.Errorf("bad signature: %d, %d calls", w.Code, e.acc.calls())
	}
	if got := testutil.ToFloat64(e.m.callbacks.WithLabelValues(KindDeploy, ResultUnauthorized)); got != 1 {
		t.Errorf("callbacks{kind=deploy,result=unauthorized} = %v", got)
	}
}

// panicAcceptor panics, to check the handler's panic is answered and counted.
type panicAcceptor struct{}

func (panicAcceptor) AcceptApproval(context.Context, ApprovalCallback) (string, error) {
	panic("acceptor bug")
}

// TestCallbackPanicRecovered: behind the HTTP guard a callback handler's
// panic answers 500 and counts in changebot_webhook_panics_total{handler},
// the callback's error result and the guard's changebot_panics_total
// {where="http"}.
func TestCallbackPanicRecovered(t *testing.T) {
	t.Parallel()
	m := NewMetrics(prometheus.NewRegistry())
	all := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "changebot_panics_total"}, []string{"where"})
	log, _ := newLogger(t)
	cb, err := NewApprovalCallbackHandler(CallbackConfig{Secret: callbackSecret, Approvals: panicAcceptor{}, Logger: log, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	h := guard.HTTP(guard.Config{Panics: all, Logger: log}, cb)
	body := []byte(`{"request_id":"r","operation_id":"op","decision":"approved","approver":"carol"}`)
	w := callback(h, http.MethodPost, sign(callbackSecret, body), body)
	if w.Code != 500 || strings.TrimSpace(w.Body.String()) != `{"error":"internal error"}` {
		t.Errorf("answer %d %s", w.Code, w.Body)
	}
	if got := testutil.ToFloat64(m.panics.WithLabelValues(KindApproval)); got != 1 {
		t.Errorf("panics{handler=approval} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(all.WithLabelValues(guard.WhereHTTP)); got != 1 {
		t.Errorf("panics{where=http} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.callbacks.WithLabelValues(KindApproval, ResultError)); got != 1 {
		t.Errorf("callbacks{kind=approval,result=error} = %v, want 1", got)
	}
}

func TestNewCallbackHandlerConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		build   func(CallbackConfig) (http.Handler, error)
		cfg     CallbackConfig
		wantErr []string
	}{
		{name: "approval valid", build: NewApprovalCallbackHandler, cfg: CallbackConfig{Secret: "s", Approvals: &fakeAcceptor{}}},
		{name: "deploy valid", build: NewDeployCallbackHandler, cfg: CallbackConfig{Secret: "s", Deploys: &fakeAcceptor{}}},
		{name: "approval empty", build: NewApprovalCallbackHandler, cfg: CallbackConfig{MaxBodyBytes: -1}, wantErr: []string{"an approval acceptor is required", "a callback secret is required", "max body bytes is negative"}},
		{name: "deploy without acceptor", build: NewDeployCallbackHandler, cfg: CallbackConfig{Secret: "s", Approvals: &fakeAcceptor{}}, wantErr: []string{"a deploy acceptor is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := tt.build(tt.cfg)
			if len(tt.wantErr) == 0 {
				if err != nil || h == nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, p := range tt.wantErr {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not report %q", err, p)
				}
			}
		})
	}
}

// TestOnBadSignatureOnlyForAWellFormedSignature: CallbackConfig.OnBadSignature
// is called for a callback refused because its well-formed signature did not
// verify (signed with another secret), and not for one refused without a
// signature or with a malformed one (a scanner's POST), nor for a good one.
func TestOnBadSignatureOnlyForAWellFormedSignature(t *testing.T) {
	t.Parallel()
	body := []byte(`{"request_id":"r","operation_id":"op","decision":"approved","approver":"carol"}`)
	for _, tc := range []struct {
		name, signature string
		code, calls     int
	}{
		{"no signature", "", http.StatusUnauthorized, 0},
		{"not sha256=", "md5=abc", http.StatusUnauthorized, 0},
		{"not hex", "sha256=zz", http.StatusUnauthorized, 0},
		{"short hex", "sha256=abcd", http.StatusUnauthorized, 0},
		{"another secret", sign("another-secret", body), http.StatusUnauthorized, 1},
		{"good", sign(callbackSecret, body), http.StatusOK, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			log, _ := newLogger(t)
			h, err := NewApprovalCallbackHandler(CallbackConfig{Secret: callbackSecret, Approvals: &fakeAcceptor{result: rules.ResultAccepted},
				Logger: log, Metrics: NewMetrics(prometheus.NewRegistry()), OnBadSignature: func() { calls++ }})
			if err != nil {
				t.Fatal(err)
			}
			if w := callback(h, http.MethodPost, tc.signature, body); w.Code != tc.code {
				t.Errorf("answer %d %s, want %d", w.Code, w.Body, tc.code)
			}
			if calls != tc.calls {
				t.Errorf("OnBadSignature called %d times, want %d", calls, tc.calls)
			}
		})
	}
}

// TestCallbackTimestamp (issue 21.11): the signature covers
// X-Changebot-Timestamp, and a callback signed more than CallbackTolerance
// from the bot's clock is refused 401 with nothing applied, so a captured
// callback replayed after retention pruned its dedupe row changes nothing.
func TestCallbackTimestamp(t *testing.T) {
	t.Parallel()
	body := []byte(`{"request_id":"req-ts","operation_id":"op_01J","ticket_id":"T-7","decision":"approved","approver":"alice"}`)
	now := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	signed := func(d time.Duration) string { return Sign(callbackSecret, now.Add(d).Unix(), body) }
	tests := []struct {
		name, timestamp, signature string
		wantStatus                 int
		wantError                  string
	}{
		{"now", at(0), signed(0), 200, ""},
		{"4 minutes behind", at(-4 * time.Minute), signed(-4 * time.Minute), 200, ""},
		{"4 minutes ahead", at(4 * time.Minute), signed(4 * time.Minute), 200, ""},
		{"replayed 10 minutes later", at(-10 * time.Minute), signed(-10 * time.Minute), 401,
			"X-Changebot-Timestamp is 10m0s from the bot's clock, more than 5m0s: sign each send with the current time"},
		{"replayed 9 days later", at(-9 * 24 * time.Hour), signed(-9 * 24 * time.Hour), 401, "is 216h0m0s from the bot's clock"},
		{"6 minutes ahead", at(6 * time.Minute), signed(6 * time.Minute), 401, "is 6m0s from the bot's clock"},
		{"an old signature with a fresh timestamp", at(0), signed(-10 * time.Minute), 401, `invalid signature`},
		{"the body-only signature of before", at(0), "sha256=" + hexHMAC(callbackSecret, body), 401, `invalid signature`},
		{"no timestamp", "", signed(0), 401, "missing or malformed X-Changebot-Timestamp"},
		{"a timestamp in milliseconds", strconv.FormatInt(now.UnixMilli(), 10), signed(0), 401, "missing or malformed X-Changebot-Timestamp"},
		{"a signed timestamp", "-" + at(0), signed(0), 401, "missing or malformed X-Changebot-Timestamp"},
		{"an RFC 3339 timestamp", now.Format(time.RFC3339), signed(0), 401, "missing or malformed X-Changebot-Timestamp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			acc := &fakeAcceptor{result: rules.ResultAccepted}
			h, err := NewApprovalCallbackHandler(CallbackConfig{Secret: callbackSecret, Approvals: acc, NowFunc: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			w := callbackAt(h, http.MethodPost, tt.timestamp, tt.signature, body)
			if w.Code != tt.wantStatus || !strings.Contains(w.Body.String(), tt.wantError) {
				t.Fatalf("answered %d %s, want %d naming %q", w.Code, w.Body.String(), tt.wantStatus, tt.wantError)
			}
			if want := map[bool]int{true: 1, false: 0}[tt.wantStatus == 200]; acc.calls() != want {
				t.Fatalf("acceptor called %d times, want %d", acc.calls(), want)
			}
		})
	}
}

// hexHMAC is hex(HMAC-SHA256(secret, body)), the signature without a
// timestamp.
func hexHMAC(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}
