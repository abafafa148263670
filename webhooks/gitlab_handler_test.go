package webhooks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

const (
	evMR       = "Merge Request Hook"
	evNote     = "Note Hook"
	evPipeline = "Pipeline Hook"
)

// count is one expected value of changebot_webhook_deliveries_total.
type count struct {
	event, outcome string
	n              float64
}

// reply is one expected answer: status and body (exact, or a prefix when
// prefix is set).
type reply struct {
	status int
	body   string
	prefix bool
}

// TestGitLabIntake walks the intake order of STYLE 19 case by case,
// checking the answer, what reached the store and what was counted.
func TestGitLabIntake(t *testing.T) {
	t.Parallel()
	// A stored Merge Request Hook: a push (an open moves no change and is
	// not stored).
	mrOpen := readFixture(t, "webhook-merge_request-update-push.json")
	noteMR := commandNote(t)
	noteEdited := []byte(strings.Replace(string(noteMR), `"action": "create"`, `"action": "update"`, 1))
	noteNoCommand := readFixture(t, "webhook-note-mr.json") // "This MR needs work."
	issueNote := []byte(`{"object_kind":"note","event_type":"note","user":{"id":3,"username":"dev"},"project_id":9,
		"project":{"id":9,"path_with_namespace":"g/p"},
		"object_attributes":{"id":77,"note":"/retry","noteable_type":"Issue","author_id":3,"action":"create"},"issue":{"id":5,"iid":2}}`)
	push := []byte(`{"object_kind":"push","ref":"refs/heads/main","project_id":15,"project":{"id":15},"commits":[]}`)
	big := []byte(`{"object_kind":"merge_request","pad":"` + strings.Repeat("x", 70<<10) + `"}`)
	accepted1 := reply{200, `{"result":"accepted","delivery_id":1}`, false}
	ignored := reply{200, `{"result":"ignored"}`, false}
	duplicate := reply{200, `{"result":"duplicate"}`, false}
	unauthorized := reply{401, `{"error":"invalid webhook token"}`, false}

	tests := []struct {
		name       string
		cfg        func(*GitLabConfig)
		send       []delivery
		want       []reply
		wantCalls  int // deliveries handed to InsertDeliveries
		wantStored int
		ignored    string             // the reason counted in changebot_webhook_ignored_total
		event      string             // metric event label
		wantCounts map[string]float64 // outcome -> count for event
		also       []count            // counts under other events
	}{
		{
			name:       "wrong method",
			send:       []delivery{{method: http.MethodGet, event: evMR, token: secretA, body: mrOpen}},
			want:       []reply{{405, `{"error":"method not allowed, use POST"}`, false}},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeMalformed: 1},
		},
		{
			name:       "too large by Content-Length",
			send:       []delivery{{event: evMR, token: secretA, body: big}},
			want:       []reply{{413, `{"error":"payload larger than 65536 bytes"}`, false}},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeTooLarge: 1},
		},
		{
			name:       "too large while reading a chunked body",
			send:       []delivery{{event: evMR, token: secretA, body: big, chunked: true}},
			want:       []reply{{413, `{"error":"payload larger than 65536 bytes"}`, false}},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeTooLarge: 1},
		},
		{
			// The token is a header: a sender without it is refused
			// before the size is checked, so it never learns the limit.
			name:       "too large without the token",
			send:       []delivery{{event: evMR, body: big}},
			want:       []reply{unauthorized},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeUnauthorized: 1, OutcomeTooLarge: 0},
		},
		{
			name:       "too large with a wrong token",
			send:       []delivery{{event: evMR, token: secretA + "x", body: big}},
			want:       []reply{unauthorized},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeUnauthorized: 1, OutcomeTooLarge: 0},
		},
		{
			name:       "no token",
			send:       []delivery{{event: evMR, body: mrOpen}},
			want:       []reply{unauthorized},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeUnauthorized: 1},
		},
		{
			name:       "wrong token with two secrets configured",
			send:       []delivery{{event: evMR, token: "hook-secret-cccccccccccc", body: mrOpen}},
			want:       []reply{unauthorized},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeUnauthorized: 1},
		},
		{
			name:       "secret with a suffix",
			send:       []delivery{{event: evMR, token: secretA + "x", body: mrOpen}},
			want:       []reply{unauthorized},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeUnauthorized: 1},
		},
		{
			name:       "right second secret",
			send:       []delivery{{event: evMR, token: secretB, idemKey: "k-1", body: mrOpen}},
			want:       []reply{accepted1},
			wantCalls:  1,
			wantStored: 1,
			event:      evMR,
			wantCounts: map[string]float64{OutcomeAccepted: 1},
		},
		{
			name:       "missing event header",
			send:       []delivery{{token: secretA, body: mrOpen}},
			want:       []reply{{400, `{"error":"missing X-Gitlab-Event header"}`, false}},
			event:      "none",
			wantCounts: map[string]float64{OutcomeMalformed: 1},
		},
		{
			name:       "malformed JSON",
			send:       []delivery{{event: evMR, token: secretA, body: []byte(`{"object_kind":"merge_request","title":"` + bodyMarker)}},
			want:       []reply{{400, `{"error":"malformed \"Merge Request Hook\" payload: `, true}},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeMalformed: 1},
		},
		{
			name:       "object_kind contradicts the header",
			send:       []delivery{{event: evMR, token: secretA, body: noteMR}},
			want:       []reply{{400, `{"error":"malformed \"Merge Request Hook\" payload: `, true}},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeMalformed: 1},
		},
		{
			name: "empty object names object_kind as missing",
			send: []delivery{{event: evMR, token: secretA, body: []byte(`{}`)}},
			want: []reply{{400, `{"error":"malformed \"Merge Request Hook\" payload: ` +
				`object_kind is missing, want \"merge_request\""}`, false}},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeMalformed: 1},
		},
		{
			name:       "no object_attributes named as missing, said once",
			send:       []delivery{{event: evMR, token: secretA, body: []byte(`{"object_kind":"merge_request","project":{"id":1}}`)}},
			want:       []reply{{400, `{"error":"malformed \"Merge Request Hook\" payload: object_attributes is missing"}`, false}},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeMalformed: 1},
		},
		{
			name: "wrong type named by its JSON path, not Go's struct",
			send: []delivery{{event: evMR, token: secretA, body: []byte(strings.Replace(string(mrOpen), `"iid": 2,`, `"iid": "abc",`, 1))}},
			want: []reply{{400, `{"error":"malformed \"Merge Request Hook\" payload: ` +
				`field object_attributes.iid must be an integer, not a string"}`, false}},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeMalformed: 1},
		},
		{
			name:       "ignored Push Hook",
			send:       []delivery{{event: "Push Hook", token: secretA, body: push}},
			want:       []reply{ignored},
			event:      "Push Hook",
			wantCounts: map[string]float64{OutcomeIgnored: 1},
			ignored:    IgnoredEventNotUsed,
		},
		{
			name:       "ignored event unknown to GitLab's list",
			send:       []delivery{{event: "Brand New Hook", token: secretA, body: []byte(`{"object_kind":"brand_new"}`)}},
			want:       []reply{ignored},
			event:      "other",
			wantCounts: map[string]float64{OutcomeIgnored: 1},
			ignored:    IgnoredEventNotUsed,
		},
		{
			name:       "ignored Emoji Hook",
			send:       []delivery{{event: "Emoji Hook", token: secretA, body: readFixture(t, "webhook-emoji-award-note.json")}},
			want:       []reply{ignored},
			event:      "Emoji Hook",
			wantCounts: map[string]float64{OutcomeIgnored: 1},
			ignored:    IgnoredEventNotUsed,
		},
		{
			name:       "ignored Job Hook",
			send:       []delivery{{event: "Job Hook", token: secretA, body: readFixture(t, "webhook-job.json")}},
			want:       []reply{ignored},
			event:      "Job Hook",
			wantCounts: map[string]float64{OutcomeIgnored: 1},
			ignored:    IgnoredEventNotUsed,
		},
		{
			name:       "issue note ignored",
			send:       []delivery{{event: evNote, token: secretA, body: issueNote}},
			want:       []reply{ignored},
			event:      evNote,
			wantCounts: map[string]float64{OutcomeIgnored: 1},
			ignored:    IgnoredNotOnMergeRequest,
		},
		{
			name:       "edited MR note ignored",
			send:       []delivery{{event: evNote, token: secretA, body: noteEdited}},
			want:       []reply{ignored},
			event:      evNote,
			wantCounts: map[string]float64{OutcomeIgnored: 1},
			ignored:    IgnoredEditedNote,
		},
		{
			name:       "MR note without a command ignored",
			send:       []delivery{{event: evNote, token: secretA, idemKey: "note-0", body: noteNoCommand}},
			want:       []reply{ignored},
			event:      evNote,
			wantCounts: map[string]float64{OutcomeIgnored: 1},
			ignored:    IgnoredNoCommand,
		},
		{
			name:       "MR note without a command stored when no filter is set",
			cfg:        func(c *GitLabConfig) { c.NoteHasCommand = nil },
			send:       []delivery{{event: evNote, token: secretA, idemKey: "note-0", body: noteNoCommand}},
			want:       []reply{accepted1},
			wantCalls:  1,
			wantStored: 1,
			event:      evNote,
			wantCounts: map[string]float64{OutcomeAccepted: 1},
		},
		{
			name:       "MR note accepted",
			send:       []delivery{{event: evNote, token: secretA, idemKey: "note-1", body: noteMR}},
			want:       []reply{accepted1},
			wantCalls:  1,
			wantStored: 1,
			event:      evNote,
			wantCounts: map[string]float64{OutcomeAccepted: 1},
		},
		{
			name:       "confidential MR note accepted",
			send:       []delivery{{event: "Confidential Note Hook", token: secretA, idemKey: "note-2", body: noteMR}},
			want:       []reply{accepted1},
			wantCalls:  1,
			wantStored: 1,
			event:      "Confidential Note Hook",
			wantCounts: map[string]float64{OutcomeAccepted: 1},
		},
		{
			name:       "MR opened ignored",
			send:       []delivery{{event: evMR, token: secretA, body: readFixture(t, "webhook-merge_request-open.json")}},
			want:       []reply{ignored},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeIgnored: 1},
			ignored:    IgnoredMergeRequestUnused,
		},
		{
			name:       "MR title edit ignored",
			send:       []delivery{{event: evMR, token: secretA, body: readFixture(t, "webhook-merge_request-update-edit.json")}},
			want:       []reply{ignored},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeIgnored: 1},
			ignored:    IgnoredMergeRequestUnused,
		},
		{
			name: "running pipeline ignored",
			send: []delivery{{event: evPipeline, token: secretA,
				body: []byte(strings.Replace(string(readFixture(t, "webhook-pipeline-mr-success.json")), `"status": "success"`, `"status": "running"`, 1))}},
			want:       []reply{ignored},
			event:      evPipeline,
			wantCounts: map[string]float64{OutcomeIgnored: 1},
			ignored:    IgnoredPipelineInProgress,
		},
		{
			name:       "pipeline accepted",
			send:       []delivery{{event: evPipeline, token: secretA, body: readFixture(t, "webhook-pipeline-mr-success.json")}},
			want:       []reply{accepted1},
			wantCalls:  1,
			wantStored: 1,
			event:      evPipeline,
			wantCounts: map[string]float64{OutcomeAccepted: 1},
		},
		{
			name: "same Idempotency-Key 5 times",
			send: []delivery{
				{event: evMR, token: secretA, idemKey: "same", body: mrOpen},
				{event: evMR, token: secretA, idemKey: "same", body: mrOpen},
				{event: evMR, token: secretB, idemKey: "same", body: mrOpen},
				{event: evMR, token: secretA, idemKey: "same", body: mrOpen},
				{event: evMR, token: secretA, idemKey: "same", body: mrOpen},
			},
			want:       []reply{accepted1, duplicate, duplicate, duplicate, duplicate},
			wantCalls:  5,
			wantStored: 1,
			event:      evMR,
			wantCounts: map[string]float64{OutcomeAccepted: 1, OutcomeDuplicate: 4},
		},
		{
			name: "no Idempotency-Key: body hash dedupe",
			send: []delivery{
				{event: evMR, token: secretA, body: mrOpen},
				{event: evMR, token: secretA, body: mrOpen},
				{event: evNote, token: secretA, body: noteMR},
			},
			want:       []reply{accepted1, duplicate, {200, `{"result":"accepted","delivery_id":2}`, false}},
			wantCalls:  3,
			wantStored: 2,
			event:      evMR,
			wantCounts: map[string]float64{OutcomeAccepted: 1, OutcomeDuplicate: 1},
			also:       []count{{evNote, OutcomeAccepted, 1}},
		},
		{
			name:       "store failure",
			cfg:        func(c *GitLabConfig) { c.Store.(*fakeStore).err = errStore },
			send:       []delivery{{event: evMR, token: secretA, body: mrOpen}},
			want:       []reply{{503, `{"error":"storing the delivery failed; it was not accepted"}`, false}},
			wantCalls:  1,
			event:      evMR,
			wantCounts: map[string]float64{OutcomeError: 1},
		},
		{
			name: "panicking decoder",
			cfg: func(c *GitLabConfig) {
				c.Decode = func(string, []byte) (platform.HookEvent, error) { panic("decoder bug") }
			},
			send:       []delivery{{event: evMR, token: secretA, body: mrOpen}},
			want:       []reply{{500, `{"error":"internal error"}`, false}},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeError: 1},
		},
		{
			name: "decoder error outside its contract",
			cfg: func(c *GitLabConfig) {
				c.Decode = func(string, []byte) (platform.HookEvent, error) { return platform.HookEvent{}, errors.New("boom") }
			},
			send:       []delivery{{event: evMR, token: secretA, body: mrOpen}},
			want:       []reply{{500, `{"error":"decoding the payload failed"}`, false}},
			event:      evMR,
			wantCounts: map[string]float64{OutcomeError: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var st *fakeStore
			e := setup(t, func(c *GitLabConfig) {
				st = c.Store.(*fakeStore)
				if tt.cfg != nil {
					tt.cfg(c)
				}
			})
			for i, d := range tt.send {
				w := e.send(d)
				got := strings.TrimSpace(w.Body.String())
				want := tt.want[i]
				if w.Code != want.status {
					t.Errorf("send %d: status %d, want %d (body %s)", i, w.Code, want.status, got)
				}
				if want.prefix && !strings.HasPrefix(got, want.body) || !want.prefix && got != want.body {
					t.Errorf("send %d: body %s, want %s", i, got, want.body)
				}
				if ct := w.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("send %d: Content-Type %q", i, ct)
				}
				if strings.Contains(got, bodyMarker) {
					t.Errorf("send %d: answer echoes the body: %s", i, got)
				}
			}
			calls, jobs := st.snapshot()
			if len(calls) != tt.wantCalls || len(jobs) != tt.wantStored {
				t.Errorf("store calls %d, stored %d; want %d, %d", len(calls), len(jobs), tt.wantCalls, tt.wantStored)
			}
			for outcome, want := range tt.wantCounts {
				if got := e.count(tt.event, outcome); got != want {
					t.Errorf("deliveries{event=%q,outcome=%q} = %v, want %v", tt.event, outcome, got, want)
				}
			}
			wantTotal := 0.0
			for _, n := range tt.wantCounts {
				wantTotal += n
			}
			for _, c := range tt.also {
				if got := e.count(c.event, c.outcome); got != c.n {
					t.Errorf("deliveries{event=%q,outcome=%q} = %v, want %v", c.event, c.outcome, got, c.n)
				}
				wantTotal += c.n
			}
			if got := totalCount(t, e.reg, "changebot_webhook_deliveries_total"); got != wantTotal {
				t.Errorf("deliveries total %v, want %v", got, wantTotal)
			}
			wantIgnored := 0.0
			if tt.ignored != "" {
				wantIgnored = 1
				if got := testutil.ToFloat64(e.m.ignored.WithLabelValues(tt.ignored)); got != 1 {
					t.Errorf("ignored{reason=%q} = %v, want 1", tt.ignored, got)
				}
			}
			if got := totalCount(t, e.reg, "changebot_webhook_ignored_total"); got != wantIgnored {
				t.Errorf("ignored total %v, want %v", got, wantIgnored)
			}
			logs := e.logs.String()
			for _, s := range []string{secretA, secretB, bodyMarker} {
				if strings.Contains(logs, s) {
					t.Errorf("logs contain %q", s)
				}
			}
		})
	}
}

// TestGitLabStoredDelivery checks what one accepted delivery hands to the
// store: dedupe key, event, project, raw body, and flows' processing job
// for the new id.
func TestGitLabStoredDelivery(t *testing.T) {
	t.Parallel()
	noteMR := commandNote(t)
	mrOpen := readFixture(t, "webhook-merge_request-update-push.json")
	longKey := strings.Repeat("k", maxIdempotencyKeyLen+1)
	longSum := sha256.Sum256([]byte(longKey))
	bodySum := sha256.Sum256(append([]byte(evMR+"\n"), mrOpen...))
	tests := []struct {
		name    string
		d       delivery
		wantKey string
		wantPID int64
	}{
		{name: "Idempotency-Key", d: delivery{event: evNote, token: secretA, idemKey: "0f1e-uuid", body: noteMR}, wantKey: "idem:0f1e-uuid", wantPID: 5},
		{name: "body hash", d: delivery{event: evMR, token: secretA, body: mrOpen}, wantKey: "sha256:" + hex.EncodeToString(bodySum[:]), wantPID: 2},
		{name: "oversized Idempotency-Key is hashed", d: delivery{event: evMR, token: secretA, idemKey: longKey, body: mrOpen}, wantKey: "idem-sha256:" + hex.EncodeToString(longSum[:]), wantPID: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			if w := e.send(tt.d); w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			calls, jobs := e.store.snapshot()
			if len(calls) != 1 || len(jobs) != 1 {
				t.Fatalf("%d calls, %d jobs; want 1, 1", len(calls), len(jobs))
			}
			want := store.Delivery{DedupeKey: tt.wantKey, Event: tt.d.event, ProjectID: tt.wantPID, Body: tt.d.body}
			if !reflect.DeepEqual(calls[0], want) {
				t.Errorf("stored %+v\nwant %+v", calls[0], want)
			}
			wantJob := ProcessDeliveryJob(1)
			if !reflect.DeepEqual(jobs[0], wantJob) {
				t.Errorf("job %+v, want %+v", jobs[0], wantJob)
			}
			if args, ok := jobs[0].Args.(rules.ProcessDeliveryArgs); !ok || args.Kind() != rules.KindProcessDelivery || args.DeliveryID != 1 {
				t.Errorf("job args %#v", jobs[0].Args)
			}
		})
	}
}

// TestGitLabStoreOutlivesClient: once verified, a delivery is stored even
// when GitLab stopped waiting (it never retries).
func TestGitLabStoreOutlivesClient(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/webhooks/gitlab", strings.NewReader(string(readFixture(t, "webhook-merge_request-update-push.json"))))
	r.Header.Set("X-Gitlab-Event", evMR)
	r.Header.Set("X-Gitlab-Token", secretA)
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if e.store.ctxErrs[0] != nil {
		t.Errorf("store saw a cancelled context: %v", e.store.ctxErrs[0])
	}
}

// TestGitLabAnswerShape pins the JSON field names GitLab's UI shows.
func TestGitLabAnswerShape(t *testing.T) {
	t.Parallel()
	e := setup(t)
	w := e.send(delivery{event: evMR, token: secretA, idemKey: "shape", body: readFixture(t, "webhook-merge_request-update-push.json")})
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, map[string]any{"result": "accepted", "delivery_id": 1.0}) {
		t.Errorf("answer %v", got)
	}
}

func TestNewGitLabHandlerConfig(t *testing.T) {
	t.Parallel()
	decode := func(string, []byte) (platform.HookEvent, error) { return platform.HookEvent{}, nil }
	tests := []struct {
		name         string
		cfg          GitLabConfig
		wantProblems []string
	}{
		{name: "valid", cfg: GitLabConfig{Secrets: []string{secretA}, Store: newFakeStore(), Decode: decode}},
		{
			name:         "empty",
			cfg:          GitLabConfig{},
			wantProblems: []string{"at least one webhook secret is required", "a delivery store is required", "a hook decoder is required"},
		},
		{
			name:         "empty second secret and negative limits",
			cfg:          GitLabConfig{Secrets: []string{secretA, ""}, Store: newFakeStore(), Decode: decode, MaxBodyBytes: -1, StoreTimeout: -1},
			wantProblems: []string{"webhook secret 2 is empty", "max body bytes is negative", "store timeout is negative"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := NewGitLabHandler(tt.cfg)
			if len(tt.wantProblems) == 0 {
				if err != nil || h == nil {
					t.Fatalf("NewGitLabHandler: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error for an invalid config")
			}
			for _, p := range tt.wantProblems {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not report %q", err, p)
				}
			}
			if strings.Contains(err.Error(), secretA) {
				t.Errorf("error leaks a secret: %v", err)
			}
		})
	}
}

// TestNewMetricsTwice: building the metrics twice on one registry reuses
// the registered collectors instead of panicking.
func TestNewMetricsTwice(t *testing.T) {
	t.Parallel()
	e := setup(t)
	m2 := NewMetrics(e.reg)
	m2.deliveries.WithLabelValues(evMR, OutcomeIgnored).Inc()
	if got := e.count(evMR, OutcomeIgnored); got != 1 {
		t.Errorf("count through the first Metrics %v, want 1", got)
	}
	if n := testutil.CollectAndCount(e.m.deliveries, "changebot_webhook_deliveries_total"); n < 21 {
		t.Errorf("%d pre-initialised series, want at least 21", n)
	}
}

// TestGitLabReviewerApprovalsIgnored: an approval given or taken back by
// one of the bot's reviewer robots (GitLabConfig.IsReviewer) is the bot's
// own and is answered ignored without a write; the same approval by anyone
// else is stored, and so is every approval when IsReviewer is nil.
func TestGitLabReviewerApprovalsIgnored(t *testing.T) {
	t.Parallel()
	unapproved := readFixture(t, "webhook-merge_request-unapproved.json") // by real6543
	approved := []byte(strings.Replace(string(unapproved), `"action": "unapproved"`, `"action": "approved"`, 1))
	reviewer := func(u string) bool { return u == "real6543" }
	tests := []struct {
		name       string
		isReviewer func(string) bool
		body       []byte
		wantStored int
	}{
		{name: "approval by a reviewer robot", isReviewer: reviewer, body: approved, wantStored: 0},
		{name: "approval taken back by a reviewer robot", isReviewer: reviewer, body: unapproved, wantStored: 0},
		{name: "approval by a person", isReviewer: func(string) bool { return false }, body: approved, wantStored: 1},
		{name: "no reviewer check", body: approved, wantStored: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, func(c *GitLabConfig) { c.IsReviewer = tt.isReviewer })
			w := e.send(delivery{event: evMR, token: secretA, body: tt.body})
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			calls, _ := e.store.snapshot()
			if len(calls) != tt.wantStored {
				t.Fatalf("stored %d deliveries, want %d (answer %s)", len(calls), tt.wantStored, w.Body)
			}
			if tt.wantStored == 0 && !strings.Contains(w.Body.String(), "ignored") {
				t.Errorf("answer %s, want ignored", w.Body)
			}
		})
	}
}
