package gitlabfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestHappyPath walks branch, commit, MR, MR pipeline, approve, merge and
// deploy pipeline, and checks the webhooks a receiver gets.
func TestHappyPath(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{ApprovalsRequired: 1})
	// Long enough that the read right after opening sees the pipeline
	// running even on a loaded machine (-race, parallel packages).
	e.srv.SetPipelineScript(e.proj.ID, PipelineScript{Duration: time.Second})
	mr := e.openMR("feature")
	if got := e.must(200, "GET", mrPath(e, mr, ""), robotToken, nil)["detailed_merge_status"]; got != "ci_still_running" {
		t.Errorf("right after open: %v, want ci_still_running", got)
	}
	e.idle()
	if got := e.must(200, "GET", mrPath(e, mr, ""), robotToken, nil)["detailed_merge_status"]; got != "not_approved" {
		t.Errorf("after pipeline: %v, want not_approved", got)
	}
	e.must(201, "POST", mrPath(e, mr, "/approve"), reviewerToken, map[string]any{"sha": mr["sha"]})
	merged := e.must(200, "PUT", mrPath(e, mr, "/merge"), robotToken, map[string]any{"sha": mr["sha"]})
	e.idle()

	// Order of events as a receiver sees them (no chaos).
	var seq []string
	for _, d := range e.recv.deliveries() {
		var m map[string]any
		if err := json.Unmarshal(d.body, &m); err != nil {
			t.Fatal(err)
		}
		oa := m["object_attributes"].(map[string]any)
		switch d.header.Get("X-Gitlab-Event") {
		case EventMergeRequest:
			seq = append(seq, "mr:"+oa["action"].(string))
		case EventPipeline:
			seq = append(seq, fmt.Sprintf("pipeline:%s:%s", oa["source"], oa["status"]))
		}
	}
	want := []string{
		"mr:open",
		"pipeline:merge_request_event:running", "pipeline:merge_request_event:success",
		"mr:approved", "mr:merge",
		"pipeline:push:running", "pipeline:push:success",
	}
	if fmt.Sprint(seq) != fmt.Sprint(want) {
		t.Fatalf("events\n got %v\nwant %v", seq, want)
	}

	mrPipe := e.recv.find(EventPipeline, "success")[0]
	if mrPipe["merge_request"].(map[string]any)["iid"].(float64) != 1 || mrPipe["object_attributes"].(map[string]any)["sha"] != mr["sha"] {
		t.Errorf("MR pipeline hook: %v", mrPipe["merge_request"])
	}
	deploy := e.recv.find(EventPipeline, "success")[1]["object_attributes"].(map[string]any)
	if deploy["sha"] != merged["merge_commit_sha"] || deploy["ref"] != "main" || deploy["source"] != "push" {
		t.Errorf("deploy pipeline %v, want sha %v on main", deploy, merged["merge_commit_sha"])
	}

	keys := map[string]bool{}
	uuids := map[string]bool{}
	for _, d := range e.recv.deliveries() {
		h := d.header
		for name, want := range map[string]string{
			"X-Gitlab-Token": secret, "User-Agent": "GitLab/17.6.0",
			"Content-Type": "application/json", "X-Gitlab-Instance": e.srv.URL(),
		} {
			if h.Get(name) != want {
				t.Errorf("%s = %q, want %q", name, h.Get(name), want)
			}
		}
		if h.Get("Idempotency-Key") == "" || h.Get("X-Gitlab-Webhook-UUID") == "" || h.Get("X-Gitlab-Event-UUID") == "" {
			t.Errorf("missing delivery ids: %v", h)
		}
		keys[h.Get("Idempotency-Key")] = true
		uuids[h.Get("X-Gitlab-Webhook-UUID")] = true
	}
	if len(keys) != len(want) || len(uuids) != len(want) {
		t.Errorf("%d idempotency keys and %d webhook uuids for %d events", len(keys), len(uuids), len(want))
	}
	snap, _ := e.srv.MergeRequest(e.proj.ID, 1)
	if snap.State != "merged" || snap.MergeCommitSHA == "" || len(snap.Approvals) != 1 || snap.Approvals[0] != "reviewer" {
		t.Errorf("snapshot %+v", snap)
	}
	if n := e.srv.CallCount("POST", "/api/v4/projects/*/merge_requests/*/approve"); n != 1 {
		t.Errorf("approve calls %d, want 1", n)
	}
}

func TestWebhookChaos(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		chaos         WebhookChaos
		wantDropped   int // exact, or -1 for "some"
		wantDuplicate int
	}{
		{name: "none", wantDropped: 0, wantDuplicate: 0},
		{name: "drop all", chaos: WebhookChaos{DropRate: 1, Seed: 1}, wantDropped: 20, wantDuplicate: 0},
		{name: "duplicate all", chaos: WebhookChaos{DuplicateRate: 1, Seed: 1}, wantDropped: 0, wantDuplicate: 20},
		{name: "half dropped", chaos: WebhookChaos{DropRate: 0.5, Seed: 7}, wantDropped: -1, wantDuplicate: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, ProjectSpec{})
			e.openMR("feature")
			e.idle()
			e.srv.SetWebhookChaos(tt.chaos)
			before := len(e.srv.Webhooks())
			for i := range 20 {
				e.srv.AddNoteAsUser(e.proj.ID, 1, "human", fmt.Sprintf("comment %d", i))
			}
			e.idle()
			sent := e.srv.Webhooks()[before:]
			dropped, dups := 0, 0
			byKey := map[string][]SentWebhook{}
			for _, w := range sent {
				if w.Dropped {
					dropped++
				}
				if w.Duplicate {
					dups++
				}
				byKey[w.IdempotencyKey] = append(byKey[w.IdempotencyKey], w)
			}
			if len(byKey) != 20 {
				t.Errorf("%d distinct events, want 20", len(byKey))
			}
			if tt.wantDropped >= 0 && dropped != tt.wantDropped || tt.wantDropped < 0 && (dropped == 0 || dropped == 20) {
				t.Errorf("dropped %d, want %d", dropped, tt.wantDropped)
			}
			if dups != tt.wantDuplicate {
				t.Errorf("duplicates %d, want %d", dups, tt.wantDuplicate)
			}
			for key, ws := range byKey {
				if len(ws) == 2 && (ws[0].WebhookUUID == ws[1].WebhookUUID || ws[0].EventUUID != ws[1].EventUUID || string(ws[0].Body) != string(ws[1].Body)) {
					t.Errorf("duplicate of %s: webhook uuids %s/%s, event uuids %s/%s", key, ws[0].WebhookUUID, ws[1].WebhookUUID, ws[0].EventUUID, ws[1].EventUUID)
				}
			}
			// The receiver saw exactly what was not dropped, with the same keys.
			received := 0
			for _, d := range e.recv.deliveries() {
				if d.header.Get("X-Gitlab-Event") == EventNote {
					received++
					if _, ok := byKey[d.header.Get("Idempotency-Key")]; !ok {
						t.Errorf("received unknown key %s", d.header.Get("Idempotency-Key"))
					}
				}
			}
			if received != len(sent)-dropped {
				t.Errorf("receiver got %d note hooks, want %d", received, len(sent)-dropped)
			}
		})
	}
}

func TestWebhookReorderAndPause(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		reorderRate float64
		wantInOrder bool
	}{
		{name: "in order", reorderRate: 0, wantInOrder: true},
		{name: "reordered", reorderRate: 1, wantInOrder: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, ProjectSpec{})
			e.openMR("feature")
			e.idle()
			e.srv.SetWebhookChaos(WebhookChaos{ReorderRate: tt.reorderRate, Seed: 3})
			e.srv.PauseWebhooks()
			var ids []int64
			for i := range 5 {
				ids = append(ids, e.srv.AddNoteAsUser(e.proj.ID, 1, "human", fmt.Sprint("n", i)).ID)
			}
			before := len(e.recv.deliveries())
			time.Sleep(20 * time.Millisecond)
			if n := len(e.recv.deliveries()) - before; n != 0 {
				t.Fatalf("%d deliveries while paused", n)
			}
			e.srv.ResumeWebhooks()
			e.idle()
			var got []int64
			for _, d := range e.recv.deliveries()[before:] {
				var m struct {
					OA struct {
						ID int64 `json:"id"`
					} `json:"object_attributes"`
				}
				_ = json.Unmarshal(d.body, &m)
				got = append(got, m.OA.ID)
			}
			if len(got) != 5 {
				t.Fatalf("got %d deliveries, want 5", len(got))
			}
			if inOrder := fmt.Sprint(got) == fmt.Sprint(ids); inOrder != tt.wantInOrder {
				t.Errorf("delivery order %v, created %v", got, ids)
			}
		})
	}
}

func TestNoWebhookURL(t *testing.T) {
	t.Parallel()
	srv := New(Options{})
	t.Cleanup(srv.Close)
	srv.AddUser("robot", robotToken)
	p := srv.AddProject(ProjectSpec{PathWithNamespace: "g/r", Members: map[string]int{"robot": AccessMaintainer}})
	srv.PushToTarget(p.ID, "main")
	ctx, cancel := contextWithTimeout()
	defer cancel()
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Webhooks()); n != 0 {
		t.Errorf("%d webhooks recorded without a URL", n)
	}
}

// TestWebhookSenders: with two senders, a second event is delivered while
// the receiver still holds the first (with one sender it would wait behind
// it, in order).
func TestWebhookSenders(t *testing.T) {
	t.Parallel()
	both := make(chan struct{})
	var mu sync.Mutex
	inflight := 0
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		inflight++
		if inflight == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
		case <-time.After(10 * time.Second):
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(recv.Close)
	srv := New(Options{WebhookURL: recv.URL})
	t.Cleanup(srv.Close)
	srv.SetWebhookSenders(2)
	srv.AddUser("robot", robotToken)
	p := srv.AddProject(ProjectSpec{PathWithNamespace: "g/r", Members: map[string]int{"robot": AccessMaintainer}})
	srv.PushToTarget(p.ID, "main") // a push pipeline: running, then success
	ctx, cancel := contextWithTimeout()
	defer cancel()
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	sent := srv.Webhooks()
	if len(sent) < 2 {
		t.Fatalf("%d webhooks sent, want at least 2", len(sent))
	}
	for _, s := range sent {
		if s.Status != http.StatusOK {
			t.Errorf("%s answered %d: the receiver never had two deliveries in flight at once", s.Event, s.Status)
		}
	}
}
