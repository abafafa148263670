package notify

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/flows/rules"
	"changebot/store"
)

// TestDestinationWants pins the routing by event and project: globs on
// the path, numeric ids, empty lists meaning every one.
func TestDestinationWants(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		d         Destination
		ev        Event
		project   string
		projectID int64
		want      bool
	}{
		{"everything", Destination{}, EventMerged, "g/r", 1, true},
		{"event listed", Destination{Events: []Event{EventFailed}}, EventFailed, "g/r", 1, true},
		{"event not listed", Destination{Events: []Event{EventFailed}}, EventApplied, "g/r", 1, false},
		{"glob matches", Destination{Projects: []string{"platform/*"}}, EventFailed, "platform/infra", 1, true},
		{"glob does not cross a slash", Destination{Projects: []string{"platform/*"}}, EventFailed, "platform/a/b", 1, false},
		{"other project", Destination{Projects: []string{"platform/*"}}, EventFailed, "web/site", 1, false},
		{"id matches", Destination{Projects: []string{"42"}}, EventFailed, "web/site", 42, true},
		{"id does not match", Destination{Projects: []string{"42"}}, EventFailed, "web/site", 43, false},
		{"id of a change without one", Destination{Projects: []string{"0"}}, EventFailed, "web/site", 0, false},
		{"second entry", Destination{Projects: []string{"a/b", "web/*"}}, EventFailed, "web/site", 9, true},
		{"both filters", Destination{Projects: []string{"web/*"}, Events: []Event{EventMerged}}, EventFailed, "web/site", 9, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.d.Wants(tt.ev, tt.project, tt.projectID); got != tt.want {
				t.Fatalf("Wants(%s, %s, %d) = %v", tt.ev, tt.project, tt.projectID, got)
			}
		})
	}
}

// TestValidateDestinations: every problem is reported, none quotes a
// secret or a URL.
func TestValidateDestinations(t *testing.T) {
	t.Parallel()
	ok := Destination{Name: "ops", Kind: KindWebhook, URL: "https://hooks.example.com/x", Secret: "s3cret"}
	tests := []struct {
		name  string
		dests []Destination
		want  []string // substrings, one per problem
	}{
		{"valid", []Destination{ok, {Name: "chat", Kind: KindSlack, URL: "https://hooks.slack.com/services/T/B/tok"}}, nil},
		{"no name", []Destination{{Kind: KindSlack, URL: "https://h/x"}}, []string{"entry 1: name"}},
		{"bad kind", []Destination{{Name: "a", Kind: "email", URL: "https://h/x"}}, []string{`kind: "email"`}},
		{"webhook without secret", []Destination{{Name: "a", Kind: KindWebhook, URL: "https://h/x"}}, []string{"secret"}},
		{"bad url", []Destination{{Name: "a", Kind: KindSlack, URL: "ftp://user:pw@h/x"}}, []string{"url"}},
		{"bad event and glob", []Destination{{Name: "a", Kind: KindSlack, URL: "https://h", Events: []Event{"queued"},
			Projects: []string{"[", ""}}}, []string{"projects: entry 1", "projects: entry 2", "events: entry 1"}},
		{"same name", []Destination{ok, ok}, []string{"entry 2 (ops): name: entry 1 has the same name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := ValidateDestinations(tt.dests)
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q, want %d like %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d %q, want it to contain %q", i, got[i], w)
				}
				for _, secret := range []string{"s3cret", "pw", "tok"} {
					if strings.Contains(got[i], secret) {
						t.Errorf("problem %q quotes a secret", got[i])
					}
				}
			}
		})
	}
}

// TestDestinationStringRedacts: neither the secret nor a URL's path (a
// Slack URL is a credential) is printed.
func TestDestinationStringRedacts(t *testing.T) {
	t.Parallel()
	d := Destination{Name: "chat", Kind: KindSlack, URL: "https://hooks.slack.com/services/T/B/tok3n", Secret: "s3cret",
		Projects: []string{"g/*"}, Events: []Event{EventFailed}}
	for _, s := range []string{d.String(), fmt.Sprintf("%v", d), fmt.Sprintf("%#v", d), fmt.Sprintf("%+v", []Destination{d})} {
		if strings.Contains(s, "tok3n") || strings.Contains(s, "s3cret") {
			t.Fatalf("printed %q", s)
		}
		if !strings.Contains(s, "https://hooks.slack.com/…") || !strings.Contains(s, "events=[failed]") {
			t.Fatalf("printed %q, want the host and the events", s)
		}
	}
}

// TestSign pins the signature against a value computed by hand
// (printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac k).
func TestSign(t *testing.T) {
	t.Parallel()
	body := []byte(`{"a":1}`)
	want := "sha256=1b6ad1bc9bf48c52ce01939866d5877c6cc4e87ddad27e16673cb8c4964394a3"
	got := Sign("k", 1700000000, body)
	if got != want {
		t.Fatalf("Sign = %q, want %q", got, want)
	}
	if !Verify("k", 1700000000, body, got) || Verify("k", 1700000001, body, got) || Verify("k2", 1700000000, body, got) ||
		Verify("k", 1700000000, []byte(`{"a":2}`), got) {
		t.Fatal("Verify accepts what it should refuse, or refuses its own signature")
	}
}

// TestRouterJobs: a move to a step that raises an event makes one job per
// destination that wants it, with the event's sequence in the key; a stay
// in the same step, a non-transition event and an unrouted project make
// none.
func TestRouterJobs(t *testing.T) {
	t.Parallel()
	r, err := NewRouter([]Destination{
		{Name: "all", Kind: KindSlack, URL: "https://h/a"},
		{Name: "failures", Kind: KindWebhook, URL: "https://h/b", Secret: "k", Events: []Event{EventFailed}, Projects: []string{"g/*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	op := store.Operation{ID: "op_1", Project: "g/r", ProjectID: 7, Step: int(rules.CreatePipelineFailed), Status: rules.StatusCreateFailed,
		MRIID: 3, MRWebURL: "https://gl/g/r/-/merge_requests/3", Detail: "pipeline failed"}
	move := store.Event{Type: store.EventTransition, Seq: 5, FromStep: int(rules.CreateMROpened), ToStep: int(rules.CreatePipelineFailed), OccurredAt: at}
	tests := []struct {
		name  string
		op    store.Operation
		ev    store.Event
		dests []string
	}{
		{"failed, both", op, move, []string{"all", "failures"}},
		{"other project", func() store.Operation { o := op; o.Project = "x/y"; return o }(), move, []string{"all"}},
		{"same step", op, func() store.Event { e := move; e.FromStep = e.ToStep; return e }(), nil},
		{"not a move", op, func() store.Event { e := move; e.Type = store.EventAttempt; return e }(), nil},
		{"no event", op, func() store.Event { e := move; e.ToStep = int(rules.HandleStarted); return e }(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			jobs := r.Jobs(tt.op, tt.ev)
			if len(jobs) != len(tt.dests) {
				t.Fatalf("%d jobs, want %v", len(jobs), tt.dests)
			}
			for i, j := range jobs {
				a := j.Args.(DeliverArgs)
				if a.Destination != tt.dests[i] || a.Payload.IdempotencyKey != "op_1:5" || a.Payload.Event != EventFailed ||
					a.Payload.Step != "CREATE_PIPELINE_FAILED" || a.Payload.MergeRequest == nil || a.Payload.MergeRequest.IID != 3 ||
					!a.Payload.OccurredAt.Equal(at) || j.InsertOpts.Queue != QueueNotifications {
					t.Fatalf("job %d: %+v", i, a)
				}
			}
		})
	}
}

// TestSlackText: one line, with the change, the event, the step, the
// reason and the merge request's link.
func TestSlackText(t *testing.T) {
	t.Parallel()
	p := Payload{Event: EventFailed, OperationID: "op_1", Title: "Raise\nreplicas", Project: "g/r", Step: "CREATE_PIPELINE_FAILED",
		Detail: "pipeline  failed", MergeRequest: &PayloadMR{IID: 3, WebURL: "https://gl/mr/3"}}
	want := "changebot: change op_1 (Raise replicas) in g/r failed at CREATE_PIPELINE_FAILED: pipeline failed — https://gl/mr/3"
	if got := SlackText(p); got != want {
		t.Fatalf("SlackText = %q\nwant         %q", got, want)
	}
}

// TestRetryAfter: seconds and HTTP dates, capped; junk and the past are 0.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"3", 3 * time.Second}, {"0", 0}, {"-1", 0}, {"soon", 0}, {"99999", MaxRetryAfter},
		{now.Add(30 * time.Second).Format(httpTimeFormat), 30 * time.Second}, {now.Add(-time.Minute).Format(httpTimeFormat), 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			if got := retryAfter(http.Header{"Retry-After": {tt.in}}, now); got != tt.want {
				t.Fatalf("retryAfter(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

const httpTimeFormat = "Mon, 02 Jan 2006 15:04:05 GMT"
