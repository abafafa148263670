package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"changebot/internal/fixture"
	"changebot/internal/guard"
	"changebot/platform"
	"changebot/platform/github"
	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
	"changebot/store/sqlite"
)

// cogniSecret is the webhook secret the Cogni-DAO project published for
// its captured deliveries (testdata/github/README.md): the signatures in
// the *.headers.json files are real GitHub signatures with it.
const cogniSecret = "402786017574bd28f9d8f7a18648939751c47fe09077d56e10f0444f14fbb73b"

// capture is one real signed delivery: its body and the headers GitHub
// sent with it.
type capture struct {
	event, delivery, signature string
	// contentType is sent as Content-Type when set.
	contentType string
	body        []byte
}

func readCapture(t testing.TB, name string) capture {
	t.Helper()
	var h map[string]string
	if err := json.Unmarshal(fixture.GitHub(t, name+".headers.json"), &h); err != nil {
		t.Fatalf("headers of %s: %v", name, err)
	}
	return capture{event: h["x-github-event"], delivery: h["x-github-delivery"], signature: h["x-hub-signature-256"],
		body: fixture.GitHub(t, name+".json")}
}

// signed makes a delivery of body signed with secret, as GitHub would.
func signed(event, delivery, secret string, body []byte) capture {
	return capture{event: event, delivery: delivery, signature: github.SignatureHeader(secret, body), body: body}
}

func (c capture) send(h http.Handler) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(c.body))
	for k, v := range map[string]string{"X-GitHub-Event": c.event, "X-GitHub-Delivery": c.delivery, "X-Hub-Signature-256": c.signature,
		"Content-Type": c.contentType} {
		if v != "" {
			r.Header.Set(k, v)
		}
	}
	w := httptest.NewRecorder()
	guarded(h).ServeHTTP(w, r)
	return w
}

func newGitHubHandler(t testing.TB, st DeliveryStore, m *Metrics) http.Handler {
	t.Helper()
	log, _ := newLogger(t)
	h, err := NewGitHubHandler(GitHubConfig{Secrets: []string{cogniSecret}, Verify: github.VerifySignature,
		Decode: github.DecodeHook, Store: st, Logger: log, Metrics: m,
		// A stand-in for commands.MayHoldCommand (webhooks never import
		// commands): a comment holds a command when it has a slash.
		NoteHasCommand: func(body string) bool { return strings.Contains(body, "/") }})
	if err != nil {
		t.Fatalf("NewGitHubHandler: %v", err)
	}
	return h
}

// TestGitHubIntake sends real and re-signed GitHub deliveries through the
// handler: the answer, what reached the store and what was counted. A
// wrong or missing signature is 401 and stores nothing; used events are
// stored once per X-GitHub-Delivery; events not used are 200 ignored and
// counted.
func TestGitHubIntake(t *testing.T) {
	t.Parallel()
	opened := readCapture(t, "webhook-pull_request-opened")
	chatter := fixture.GitHub(t, "webhook-issue_comment-created-pr.json") // "trigger abc"
	comment := bytes.Replace(chatter, []byte(`"body": "trigger abc"`), []byte(`"body": "/retry"`), 1)
	edited := fixture.GitHub(t, "webhook-issue_comment-edited-pr.json")
	ping := fixture.GitHub(t, "webhook-ping-repo.json")
	deployment := fixture.GitHub(t, "webhook-deployment_status-created.json")
	tampered := opened
	tampered.body = bytes.Replace(opened.body, []byte(`"opened"`), []byte(`"closed"`), 1)
	otherSecret := signed(opened.event, opened.delivery, "not-the-secret", opened.body)
	unsigned := opened
	unsigned.signature = ""
	upperHex := opened
	upperHex.signature = "sha256=" + strings.ToUpper(strings.TrimPrefix(opened.signature, "sha256="))
	asJSON := opened
	asJSON.contentType = "application/json; charset=utf-8"
	// GitHub's other "Content type" choice: the JSON in a form field
	// named payload, signed as sent.
	form := []byte("payload=" + url.QueryEscape(string(opened.body)))
	formEncoded := signed(opened.event, opened.delivery, cogniSecret, form)
	formEncoded.contentType = "application/x-www-form-urlencoded"
	tests := []struct {
		name       string
		send       []capture
		want       []string // status and body of each answer
		wantStored []string // dedupe keys stored
		event      string
		wantCounts map[string]float64
		// wantIgnored is the changebot_webhook_ignored_total reason
		// counted once, "" for none.
		wantIgnored string
	}{
		{name: "real delivery, then its redelivery", send: []capture{opened, opened},
			want:       []string{`200 {"result":"accepted","delivery_id":1}`, `200 {"result":"duplicate"}`},
			wantStored: []string{"github:" + opened.delivery}, event: "pull_request",
			wantCounts: map[string]float64{OutcomeAccepted: 1, OutcomeDuplicate: 1}},
		{name: "body changed after signing", send: []capture{tampered},
			want: []string{`401 {"error":"invalid webhook signature"}`}, event: "pull_request",
			wantCounts: map[string]float64{OutcomeUnauthorized: 1}},
		{name: "signed with another secret", send: []capture{otherSecret},
			want: []string{`401 {"error":"invalid webhook signature"}`}, event: "pull_request",
			wantCounts: map[string]float64{OutcomeUnauthorized: 1}},
		{name: "no signature", send: []capture{unsigned},
			want: []string{`401 {"error":"invalid webhook signature"}`}, event: "pull_request",
			wantCounts: map[string]float64{OutcomeUnauthorized: 1}},
		{name: "signature in uppercase hex", send: []capture{upperHex},
			want:       []string{`200 {"result":"accepted","delivery_id":1}`},
			wantStored: []string{"github:" + opened.delivery}, event: "pull_request",
			wantCounts: map[string]float64{OutcomeAccepted: 1}},
		{name: "JSON content type with a charset", send: []capture{asJSON},
			want:       []string{`200 {"result":"accepted","delivery_id":1}`},
			wantStored: []string{"github:" + opened.delivery}, event: "pull_request",
			wantCounts: map[string]float64{OutcomeAccepted: 1}},
		{name: "form-encoded delivery names the content type changebot needs", send: []capture{formEncoded},
			want: []string{`415 {"error":"changebot needs Content-Type application/json, not application/x-www-form-urlencoded: ` +
				`set the GitHub webhook's Content type to application/json"}`}, event: "pull_request",
			wantCounts: map[string]float64{OutcomeMalformed: 1}},
		{name: "no delivery id", send: []capture{signed("pull_request", "", cogniSecret, opened.body)},
			want: []string{`400 {"error":"missing X-GitHub-Delivery header"}`}, event: "pull_request",
			wantCounts: map[string]float64{OutcomeMalformed: 1}},
		{name: "comment on a pull request", send: []capture{signed("issue_comment", "c-1", cogniSecret, comment)},
			want:       []string{`200 {"result":"accepted","delivery_id":1}`},
			wantStored: []string{"github:c-1"}, event: "issue_comment", wantCounts: map[string]float64{OutcomeAccepted: 1}},
		{name: "comment without a command", send: []capture{signed("issue_comment", "c-3", cogniSecret, chatter)},
			want: []string{`200 {"result":"ignored"}`}, event: "issue_comment",
			wantCounts: map[string]float64{OutcomeIgnored: 1}, wantIgnored: IgnoredNoCommand},
		{name: "edited comment runs nothing", send: []capture{signed("issue_comment", "c-2", cogniSecret, edited)},
			want: []string{`200 {"result":"ignored"}`}, event: "issue_comment",
			wantCounts: map[string]float64{OutcomeIgnored: 1}, wantIgnored: IgnoredEditedNote},
		{name: "ping answered and counted", send: []capture{signed("ping", "p-1", cogniSecret, ping)},
			want: []string{`200 {"result":"ignored"}`}, event: "ping", wantCounts: map[string]float64{OutcomeIgnored: 1},
			wantIgnored: IgnoredEventNotUsed},
		{name: "event not used", send: []capture{signed("deployment_status", "d-1", cogniSecret, deployment)},
			want: []string{`200 {"result":"ignored"}`}, event: "other", wantCounts: map[string]float64{OutcomeIgnored: 1},
			wantIgnored: IgnoredEventNotUsed},
		{name: "used event that does not decode", send: []capture{signed("pull_request", "m-1", cogniSecret, []byte(`[1]`))},
			want: []string{`400 {"error":"malformed GitHub \"pull_request\" payload: `}, event: "pull_request",
			wantCounts: map[string]float64{OutcomeMalformed: 1}},
		// Signed payloads without the object the event is about: 400
		// naming what is missing, nothing stored (they used to panic).
		{name: "check run event without check run", send: []capture{signed("check_run", "x-1", cogniSecret, []byte(`{"action":"completed"}`))},
			want:  []string{`400 {"error":"malformed GitHub \"check_run\" payload: check_run and repository are missing"}`},
			event: "check_run", wantCounts: map[string]float64{OutcomeMalformed: 1}},
		{name: "check suite event without check suite", send: []capture{signed("check_suite", "x-2", cogniSecret, []byte(`{"action":"completed"}`))},
			want:  []string{`400 {"error":"malformed GitHub \"check_suite\" payload: check_suite and repository are missing"}`},
			event: "check_suite", wantCounts: map[string]float64{OutcomeMalformed: 1}},
		{name: "workflow run event without workflow run", send: []capture{signed("workflow_run", "x-3", cogniSecret, []byte(`{"action":"completed"}`))},
			want:  []string{`400 {"error":"malformed GitHub \"workflow_run\" payload: workflow_run and repository are missing"}`},
			event: "workflow_run", wantCounts: map[string]float64{OutcomeMalformed: 1}},
		{name: "comment without issue and repository", send: []capture{signed("issue_comment", "x-4", cogniSecret, []byte(`{"action":"created","comment":{"id":1,"body":"/retry"}}`))},
			want:  []string{`400 {"error":"malformed GitHub \"issue_comment\" payload: issue and repository are missing"}`},
			event: "issue_comment", wantCounts: map[string]float64{OutcomeMalformed: 1}},
		{name: "empty comment event", send: []capture{signed("issue_comment", "x-5", cogniSecret, []byte(`{}`))},
			want:  []string{`400 {"error":"malformed GitHub \"issue_comment\" payload: action is missing"}`},
			event: "issue_comment", wantCounts: map[string]float64{OutcomeMalformed: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := newFakeStore()
			m := NewMetrics(prometheus.NewRegistry())
			h := newGitHubHandler(t, st, m)
			for i, c := range tc.send {
				w := c.send(h)
				got := strings.TrimSpace(fmt.Sprintf("%d %s", w.Code, w.Body))
				if !strings.HasPrefix(got, tc.want[i]) {
					t.Errorf("delivery %d answered %s, want %s", i+1, got, tc.want[i])
				}
			}
			calls, _ := st.snapshot()
			var stored []string
			for k := range st.stored {
				stored = append(stored, k)
			}
			if strings.Join(stored, ",") != strings.Join(tc.wantStored, ",") {
				t.Errorf("stored %v, want %v", stored, tc.wantStored)
			}
			if len(tc.wantStored) == 0 && len(calls) != 0 {
				t.Errorf("the store was called %d times, want never", len(calls))
			}
			for _, d := range calls {
				if !bytes.Equal(d.Body, tc.send[0].body) || d.Event != tc.send[0].event {
					t.Errorf("stored event %q and a body of %d bytes, want the received %q and bytes", d.Event, len(d.Body), tc.send[0].event)
				}
			}
			for _, reason := range []string{IgnoredNoCommand, IgnoredEditedNote, IgnoredEventNotUsed} {
				want := 0.0
				if reason == tc.wantIgnored {
					want = 1
				}
				if got := testutil.ToFloat64(m.ignored.WithLabelValues(reason)); got != want {
					t.Errorf("ignored{reason=%s} = %v, want %v", reason, got, want)
				}
			}
			if got := testutil.ToFloat64(m.panics.WithLabelValues(handlerGitHub)); got != 0 {
				t.Errorf("%v panics counted, want none", got)
			}
			for outcome, n := range tc.wantCounts {
				if got := testutil.ToFloat64(m.deliveries.WithLabelValues(tc.event, outcome)); got != n {
					t.Errorf("deliveries{event=%s,outcome=%s} = %v, want %v", tc.event, outcome, got, n)
				}
			}
		})
	}
}

// TestIntakePanicCounted: behind the HTTP guard, a panic while handling a
// delivery answers 500 and counts in changebot_webhook_panics_total
// {handler}, in the deliveries' error outcome and in the guard's
// changebot_panics_total{where="http"}, on both platforms' intake;
// http.ErrAbortHandler reaches net/http and counts nowhere.
func TestIntakePanicCounted(t *testing.T) {
	t.Parallel()
	opened := readCapture(t, "webhook-pull_request-opened")
	tests := []struct {
		name      string
		value     any // what the decoder panics with
		wantCode  int
		wantCount float64
	}{
		{name: "bug", value: "decoder bug", wantCode: http.StatusInternalServerError, wantCount: 1},
		{name: "abort", value: http.ErrAbortHandler, wantCode: http.StatusOK},
	}
	for _, tc := range tests {
		for _, handler := range []string{handlerGitHub, handlerGitLab} {
			t.Run(tc.name+"/"+handler, func(t *testing.T) {
				t.Parallel()
				panicking := func(string, []byte) (platform.HookEvent, error) { panic(tc.value) }
				m := NewMetrics(prometheus.NewRegistry())
				all := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "changebot_panics_total"}, []string{"where"})
				log, _ := newLogger(t)
				var h http.Handler
				var r *http.Request
				event := "pull_request"
				if handler == handlerGitHub {
					gh, err := NewGitHubHandler(GitHubConfig{Secrets: []string{cogniSecret}, Verify: github.VerifySignature,
						Decode: panicking, Store: newFakeStore(), Logger: log, Metrics: m})
					if err != nil {
						t.Fatal(err)
					}
					h = gh
					r = httptest.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(opened.body))
					r.Header.Set("X-GitHub-Event", opened.event)
					r.Header.Set("X-GitHub-Delivery", opened.delivery)
					r.Header.Set("X-Hub-Signature-256", opened.signature)
				} else {
					gl, err := NewGitLabHandler(GitLabConfig{Secrets: []string{"s"}, Decode: panicking, Store: newFakeStore(), Logger: log, Metrics: m})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = gl.Close(context.Background()) })
					h = gl
					event = "Merge Request Hook"
					r = httptest.NewRequest(http.MethodPost, "/webhooks/gitlab", strings.NewReader(`{"object_kind":"merge_request"}`))
					r.Header.Set("X-Gitlab-Token", "s")
					r.Header.Set("X-Gitlab-Event", event)
				}
				w := httptest.NewRecorder()
				raised := serveRaising(guard.HTTP(guard.Config{Panics: all, Logger: log}, h), w, r)
				if tc.wantCount == 0 && raised != tc.value {
					t.Errorf("re-raised %v, want %v", raised, tc.value)
				}
				if w.Code != tc.wantCode {
					t.Errorf("answer %d %s, want %d", w.Code, w.Body, tc.wantCode)
				}
				if got := testutil.ToFloat64(m.panics.WithLabelValues(handler)); got != tc.wantCount {
					t.Errorf("webhook panics{handler=%s} = %v, want %v", handler, got, tc.wantCount)
				}
				if got := testutil.ToFloat64(m.deliveries.WithLabelValues(event, OutcomeError)); got != tc.wantCount {
					t.Errorf("deliveries{event=%s,outcome=error} = %v, want %v", event, got, tc.wantCount)
				}
				if got := testutil.ToFloat64(all.WithLabelValues(guard.WhereHTTP)); got != tc.wantCount {
					t.Errorf("panics{where=http} = %v, want %v", got, tc.wantCount)
				}
			})
		}
	}
}

// serveRaising serves r as net/http's server would, returning the value
// of a panic that reached it.
func serveRaising(h http.Handler, w http.ResponseWriter, r *http.Request) (raised any) {
	defer func() { raised = recover() }()
	h.ServeHTTP(w, r)
	return nil
}

// TestGitHubIntakeRealStores: on PostgreSQL and SQLite, every used event
// of the real signed captures is stored once however often GitHub
// redelivers it, with the repository id; deliveries with a wrong signature
// leave no row.
func TestGitHubIntakeRealStores(t *testing.T) {
	t.Parallel()
	captures, err := filepath.Glob(filepath.Join(fixture.GitHubDir(), "webhook-*.headers.json"))
	if err != nil || len(captures) < 6 {
		t.Fatalf("signed captures: %v %v", captures, err)
	}
	stores := map[string]func(t *testing.T) store.Store{
		"postgres": func(t *testing.T) store.Store {
			sc := pgtest.New(t)
			s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"sqlite": func(t *testing.T) store.Store {
			db, err := sqlite.OpenDB(filepath.Join(t.TempDir(), "intake.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if err := sqlite.Migrate(t.Context(), db, nil); err != nil {
				t.Fatal(err)
			}
			s, err := sqlite.New(db, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			h := newGitHubHandler(t, s, nil)
			for _, path := range captures {
				c := readCapture(t, strings.TrimSuffix(filepath.Base(path), ".headers.json"))
				bad := c
				bad.signature = github.SignatureHeader("wrong", c.body)
				if w := bad.send(h); w.Code != http.StatusUnauthorized {
					t.Fatalf("%s with a wrong signature: %d %s", path, w.Code, w.Body)
				}
				for range 3 {
					if w := c.send(h); w.Code != http.StatusOK {
						t.Fatalf("%s: %d %s", path, w.Code, w.Body)
					}
				}
			}
			n, err := s.CountDeliveries(t.Context(), s.DB())
			if err != nil || n != len(captures) {
				t.Fatalf("%d deliveries stored (%v), want %d: one per capture", n, err, len(captures))
			}
			ds, err := s.DeliveriesAfter(t.Context(), s.DB(), 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				if !strings.HasPrefix(d.DedupeKey, "github:") || d.ProjectID == 0 {
					t.Errorf("delivery %d: key %q project %d, want github:<GUID> and the repository id", d.ID, d.DedupeKey, d.ProjectID)
				}
			}
		})
	}
}

// TestNewGitHubHandlerConfig: no secret, an empty one, or a missing
// verifier, decoder or store is refused, every problem named at once.
func TestNewGitHubHandlerConfig(t *testing.T) {
	t.Parallel()
	_, err := NewGitHubHandler(GitHubConfig{Secrets: []string{""}})
	if err == nil {
		t.Fatal("a handler without a usable secret was built")
	}
	for _, want := range []string{"webhook secret 1 is empty", "signature verifier is required", "hook decoder is required", "delivery store is required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := NewGitHubHandler(GitHubConfig{Verify: github.VerifySignature, Decode: github.DecodeHook, Store: newFakeStore()}); err == nil ||
		!strings.Contains(err.Error(), "a webhook secret is required") {
		t.Fatalf("no secret: %v, want refused", err)
	}
}
