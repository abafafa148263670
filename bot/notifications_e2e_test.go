package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"changebot/demo"
	"changebot/flows/rules"
	"changebot/notify"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
	"changebot/store/postgres/pgtest"
)

// notifyReceiver is the test's notification destination: it records every
// request by path and answers each path's scripted statuses in turn (200
// once they run out).
type notifyReceiver struct {
	mu       sync.Mutex
	got      map[string][]receivedNotification
	statuses map[string][]int
}

// receivedNotification is one request the receiver got.
type receivedNotification struct {
	header http.Header
	body   []byte
}

func (rc *notifyReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.got[r.URL.Path] = append(rc.got[r.URL.Path], receivedNotification{header: r.Header.Clone(), body: body})
	status := http.StatusOK
	if s := rc.statuses[r.URL.Path]; len(s) > 0 {
		status, rc.statuses[r.URL.Path] = s[0], s[1:]
	}
	w.WriteHeader(status)
}

func (rc *notifyReceiver) requests(path string) []receivedNotification {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got[path])
}

// TestNotificationsSignedRetriedRouted (issue 25 point 3): a change whose
// MR pipeline fails notifies each destination routed for its project and
// event once: the webhook with a signed payload, retried with the same
// delivery id after a 503; Slack with its one-line text; a 410 is
// recorded as failed and not retried; destinations of another project or
// of an event that did not happen get nothing; the delivery log reads it
// all through GET /api/v1/notifications.
func TestNotificationsSignedRetriedRouted(t *testing.T) {
	t.Parallel()
	const secret = "notify-e2e-secret"
	rc := &notifyReceiver{got: map[string][]receivedNotification{}, statuses: map[string][]int{"/hook": {503}, "/gone": {410}}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	env := newTestEnv(t, true, 100*time.Millisecond)
	env.GitLab.SetPipelineScript(env.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed"}})
	dest := func(name, kind string, projects []string, events ...notify.Event) notify.Destination {
		d := notify.Destination{Name: name, Kind: kind, URL: srv.URL + "/" + name, Projects: projects, Events: events}
		if kind == notify.KindWebhook {
			d.Secret = secret
		}
		return d
	}
	env.Config.Notifications = []notify.Destination{
		dest("hook", notify.KindWebhook, []string{"platform/*"}, notify.EventFailed),
		dest("chat", notify.KindSlack, []string{strconv.FormatInt(env.Project.ID, 10)}, notify.EventFailed),
		dest("people", notify.KindWebhook, []string{demo.Project}, notify.EventNeedsPerson),
		dest("gone", notify.KindWebhook, nil, notify.EventFailed),
		dest("elsewhere", notify.KindWebhook, []string{"other/*"}),
		dest("merges", notify.KindWebhook, nil, notify.EventMerged, notify.EventApplied),
	}
	app, sc := startBot(t, env)
	opID, iid := runUntil(t, env, "CREATE_PIPELINE_FAILED")

	// The positive sign: every notification job has run to its end.
	jobs := waitNotificationJobs(t, sc, func() bool { return len(rc.requests("/hook")) >= 2 })

	// One delivery per routed event: the moves of the history say how
	// many of each event there were.
	moves := map[notify.Event][]int64{}
	for _, ev := range eventsOf(t, app, opID) {
		if ev.Type != store.EventTransition || ev.FromStep == ev.ToStep {
			continue
		}
		if e, ok := notify.MoveEvent(rules.StepCode(ev.FromStep), rules.StepCode(ev.ToStep)); ok {
			moves[e] = append(moves[e], ev.Seq)
		}
	}
	if len(moves[notify.EventFailed]) != 1 {
		t.Fatalf("failed moves %v, want one", moves[notify.EventFailed])
	}
	failedKey := notify.DeliveryKey(opID, moves[notify.EventFailed][0])
	want := map[string]int{"hook": 1, "chat": 1, "gone": 1, "people": len(moves[notify.EventNeedsPerson])}
	for d, n := range want {
		if jobs[d] != n {
			t.Errorf("destination %s: %d jobs, want %d", d, jobs[d], n)
		}
	}
	for _, d := range []string{"elsewhere", "merges"} {
		if jobs[d] != 0 || len(rc.requests("/"+d)) != 0 {
			t.Errorf("unrouted destination %s got %d jobs and %d requests", d, jobs[d], len(rc.requests("/"+d)))
		}
	}

	// The webhook: a 503, then the same delivery again, signed, delivered.
	hook := rc.requests("/hook")
	if len(hook) != 2 {
		t.Fatalf("hook got %d requests, want 2 (503, then 200)", len(hook))
	}
	for i, r := range hook {
		ts, err := strconv.ParseInt(r.header.Get(notify.HeaderTimestamp), 10, 64)
		if err != nil || time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
			t.Errorf("hook request %d: timestamp %q", i, r.header.Get(notify.HeaderTimestamp))
		}
		if !notify.Verify(secret, ts, r.body, r.header.Get(notify.HeaderSignature)) {
			t.Errorf("hook request %d: signature %q does not verify", i, r.header.Get(notify.HeaderSignature))
		}
		if notify.Verify("another secret", ts, r.body, r.header.Get(notify.HeaderSignature)) {
			t.Errorf("hook request %d verifies with another secret", i)
		}
		if r.header.Get(notify.HeaderDelivery) != failedKey || r.header.Get(notify.HeaderEvent) != "failed" {
			t.Errorf("hook request %d: delivery %q event %q, want %s failed", i, r.header.Get(notify.HeaderDelivery), r.header.Get(notify.HeaderEvent), failedKey)
		}
		var p notify.Payload
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatalf("hook request %d: %v", i, err)
		}
		if p.Event != notify.EventFailed || p.OperationID != opID || p.IdempotencyKey != failedKey || p.Project != demo.Project ||
			p.ProjectID != env.Project.ID || p.Step != "CREATE_PIPELINE_FAILED" || p.Status != rules.StatusCreateFailed ||
			p.MergeRequest == nil || p.MergeRequest.IID != iid || p.MergeRequest.WebURL == "" || p.HeadSHA == "" ||
			p.RequestedBy != demo.Requester || p.OccurredAt.IsZero() {
			t.Errorf("hook request %d payload %s", i, r.body)
		}
	}
	if string(hook[0].body) != string(hook[1].body) {
		t.Errorf("the retry sent another body:\n%s\n%s", hook[0].body, hook[1].body)
	}

	// Slack: one message in its incoming-webhook shape, unsigned.
	chat := rc.requests("/chat")
	if len(chat) != 1 {
		t.Fatalf("chat got %d requests, want 1", len(chat))
	}
	var msg map[string]string
	if err := json.Unmarshal(chat[0].body, &msg); err != nil || len(msg) != 1 ||
		!strings.Contains(msg["text"], opID) || !strings.Contains(msg["text"], "failed at CREATE_PIPELINE_FAILED") {
		t.Errorf("chat body %s, want {\"text\": …} naming the change and the failure", chat[0].body)
	}
	if chat[0].header.Get(notify.HeaderSignature) != "" {
		t.Errorf("the Slack message is signed")
	}
	if n := len(rc.requests("/gone")); n != 1 {
		t.Errorf("gone got %d requests, want 1 (a 410 is not retried)", n)
	}
	for _, r := range rc.requests("/people") {
		if r.header.Get(notify.HeaderEvent) != "needs_person" {
			t.Errorf("people got event %q", r.header.Get(notify.HeaderEvent))
		}
	}

	// The delivery log, through the API.
	status, _, body := apiCall(t, env, http.MethodGet, "/api/v1/notifications?operation_id="+opID, demo.APIToken, nil)
	var log struct {
		Deliveries []struct {
			Destination    string  `json:"destination"`
			DeliveryID     string  `json:"delivery_id"`
			State          string  `json:"state"`
			Attempts       int     `json:"attempts"`
			LastStatusCode *int    `json:"last_status_code"`
			DeliveredAt    *string `json:"delivered_at"`
		} `json:"deliveries"`
	}
	if err := json.Unmarshal(body, &log); status != http.StatusOK || err != nil {
		t.Fatalf("GET /api/v1/notifications: %d %s", status, body)
	}
	got := map[string]string{}
	for _, d := range log.Deliveries {
		code := 0
		if d.LastStatusCode != nil {
			code = *d.LastStatusCode
		}
		if d.Destination != "people" {
			got[d.Destination] = fmt.Sprintf("%s %s attempts=%d last=%d delivered=%v", d.DeliveryID, d.State, d.Attempts, code, d.DeliveredAt != nil)
		}
	}
	wantLog := map[string]string{
		"hook": failedKey + " delivered attempts=2 last=200 delivered=true",
		"chat": failedKey + " delivered attempts=1 last=200 delivered=true",
		"gone": failedKey + " failed attempts=1 last=410 delivered=false",
	}
	if fmt.Sprint(got) != fmt.Sprint(wantLog) {
		t.Errorf("delivery log %v\nwant %v", got, wantLog)
	}
	status, _, body = apiCall(t, env, http.MethodGet, "/api/v1/notifications?destination=elsewhere", demo.APIToken, nil)
	if status != http.StatusOK || strings.TrimSpace(string(body)) != `{"deliveries":[]}` {
		t.Errorf("log of an unrouted destination: %d %s", status, body)
	}
}

// waitNotificationJobs waits, 20 s at most, until no notification job of
// schema sc is live and ready reports true, and returns how many jobs each
// destination got.
func waitNotificationJobs(t *testing.T, sc pgtest.Schema, ready func() bool) map[string]int {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var live int
		if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1
			AND state NOT IN ('completed', 'cancelled', 'discarded')`, notify.KindDeliver).Scan(&live); err != nil {
			t.Fatal(err)
		}
		if live == 0 && ready() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("notification jobs still live after 20 s (%d), or the receiver's wait not met", live)
		}
		time.Sleep(50 * time.Millisecond)
	}
	jobs := map[string]int{}
	rows, err := sc.Pool.Query(ctx, `SELECT args->>'destination' FROM river_job WHERE kind = $1`, notify.KindDeliver)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		jobs[d]++
	}
	return jobs
}

// TestNotificationsOfAnAppliedChange: a change carried to VALIDATED
// notifies a destination of every event, in the order of its moves, each
// move once with its own delivery id: the approval it waited for, the
// merge, the deploy's confirmation; a 429 with Retry-After: 1 answered
// first is delivered again a second later.
func TestNotificationsOfAnAppliedChange(t *testing.T) {
	t.Parallel()
	const secret = "notify-e2e-secret-2"
	rc := &notifyReceiver{got: map[string][]receivedNotification{}, statuses: map[string][]int{"/all": {429}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		first := len(rc.got[r.URL.Path]) == 0
		rc.mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "1")
		}
		rc.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	env := newTestEnv(t, true, 100*time.Millisecond)
	env.Config.Notifications = []notify.Destination{{Name: "all", Kind: notify.KindWebhook, URL: srv.URL + "/all", Secret: secret}}
	app, sc := startBot(t, env)
	opID, err := demo.SubmitChange(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, env, opID, rules.StatusValidated, 60*time.Second)

	var want []string // event and delivery id of each move that raises one
	for _, ev := range eventsOf(t, app, opID) {
		if ev.Type != store.EventTransition || ev.FromStep == ev.ToStep {
			continue
		}
		if e, ok := notify.MoveEvent(rules.StepCode(ev.FromStep), rules.StepCode(ev.ToStep)); ok {
			want = append(want, string(e)+" "+notify.DeliveryKey(opID, ev.Seq))
		}
	}
	if len(want) < 2 {
		t.Fatalf("moves raising events: %v, want at least merged and applied", want)
	}
	jobs := waitNotificationJobs(t, sc, func() bool { return len(rc.requests("/all")) >= len(want)+1 })
	if jobs["all"] != len(want) {
		t.Errorf("%d jobs for %d events (%v)", jobs["all"], len(want), want)
	}
	reqs := rc.requests("/all")
	if len(reqs) != len(want)+1 {
		t.Fatalf("%d requests, want %d (one per event, and the 429's again)", len(reqs), len(want)+1)
	}
	var got []string
	seen := map[string]bool{}
	for i, r := range reqs {
		ts, _ := strconv.ParseInt(r.header.Get(notify.HeaderTimestamp), 10, 64)
		if !notify.Verify(secret, ts, r.body, r.header.Get(notify.HeaderSignature)) {
			t.Errorf("request %d: signature does not verify", i)
		}
		key := r.header.Get(notify.HeaderEvent) + " " + r.header.Get(notify.HeaderDelivery)
		if !seen[key] {
			seen[key] = true
			got = append(got, key)
		}
	}
	// The first delivery came twice (429, then a second later); the
	// others may overtake it, so compare as sets, then check the events.
	if len(got) != len(want) {
		t.Fatalf("deliveries %v, want %v", got, want)
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("no delivery %q; got %v", w, got)
		}
	}
	var events []string
	for _, w := range want {
		events = append(events, strings.Fields(w)[0])
	}
	for _, e := range []string{"merged", "applied"} {
		if !slices.Contains(events, e) {
			t.Errorf("events %v, want %s among them", events, e)
		}
	}
	status, _, body := apiCall(t, env, http.MethodGet, "/api/v1/notifications?destination=all&operation_id="+opID, demo.APIToken, nil)
	var log struct {
		Deliveries []struct {
			State    string `json:"state"`
			Attempts int    `json:"attempts"`
		} `json:"deliveries"`
	}
	if err := json.Unmarshal(body, &log); status != http.StatusOK || err != nil || len(log.Deliveries) != len(want) {
		t.Fatalf("GET /api/v1/notifications: %d %s", status, body)
	}
	attempts := 0
	for _, d := range log.Deliveries {
		if d.State != store.NotificationDelivered {
			t.Errorf("a delivery is %s: %s", d.State, body)
		}
		attempts += d.Attempts
	}
	if attempts != len(want)+1 {
		t.Errorf("%d attempts logged, want %d: %s", attempts, len(want)+1, body)
	}
}
