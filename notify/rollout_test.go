package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"changebot/flows/rules"
	"changebot/store"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// rolloutReceiver records the bodies each path of it is sent.
type rolloutReceiver struct {
	mu   sync.Mutex
	got  map[string][][]byte
	keys map[string][]string
}

func (rc *rolloutReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.got[r.URL.Path] = append(rc.got[r.URL.Path], body)
	rc.keys[r.URL.Path] = append(rc.keys[r.URL.Path], r.Header.Get(HeaderEvent)+" "+r.Header.Get(HeaderDelivery))
}

// TestRolloutOf200Changes (issue 25 point 3): 200 changes of one rollout
// moved by 8 goroutines on two replicas of one PostgreSQL database, with
// the router's per-change jobs and rollout notice as the engine passes
// them, through every state: all waiting for approval, approved and
// merged with 2 failing, the 2 retried and merged, all applied. The
// receivers get exactly one summary per state the rollout settled in
// (needs a person, failed, all merged, done), in that order, and none per
// change; the webhook carries the rollout object, Slack the line. The
// phases are apart so that each summary's counts are known; within a
// phase the moves race.
func TestRolloutOf200Changes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc := pgtest.New(t)
	var replicas []*postgres.Store
	for range 2 {
		s, err := postgres.New(sc.Pool, &postgres.StoreOpts{Schema: sc.Name})
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, s)
	}
	rc := &rolloutReceiver{got: map[string][][]byte{}, keys: map[string][]string{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	router, err := NewRouter([]Destination{
		{Name: "hook", Kind: KindWebhook, URL: srv.URL + "/hook", Secret: "rollout-secret"},
		{Name: "chat", Kind: KindSlack, URL: srv.URL + "/chat", Events: []Event{EventFailed, EventApplied}},
		{Name: "elsewhere", Kind: KindWebhook, URL: srv.URL + "/elsewhere", Secret: "s", Projects: []string{"other/*"}},
	})
	if err != nil {
		t.Fatal(err)
	}

	const n = 200
	ops := make([]store.Operation, n)
	for i := range ops {
		op, created, err := replicas[0].CreateOperation(ctx, store.CreateParams{Operation: store.Operation{
			ID: fmt.Sprintf("op_ro200_%03d", i), SubjectID: fmt.Sprintf("svc-%03d", i), TargetKey: "prod", Project: "platform/config",
			ProjectID: 101, Title: "t", RequestedBy: "alice", ApprovalFirst: true, Step: int(rules.ApprovalSending),
			Status: rules.StatusApprovalSending, RolloutID: "ro-200", Files: []store.File{{Path: "a.yaml", Content: "x: 1"}}},
			Event: store.EventParams{Type: store.EventSubmitted, Actor: "alice", Source: "api"}})
		if err != nil || !created {
			t.Fatalf("creating %d: %v", i, err)
		}
		ops[i] = op
	}
	var mu sync.Mutex
	move := func(i int, to rules.StepCode, detail string) {
		mu.Lock()
		op := ops[i]
		mu.Unlock()
		moved, _, err := replicas[i%2].ApplyTransition(ctx, store.TransitionParams{OperationID: op.ID, ExpectStep: op.Step,
			ToStep: int(to), ToStatus: rules.MustStep(to).Status, Update: func(o *store.Operation) { o.Detail = detail },
			Event:         store.EventParams{Type: store.EventTransition, Actor: "changebot", Source: "job:test"},
			EventJobsFunc: router.Jobs, Rollout: router.RolloutNotice()})
		if err != nil {
			t.Errorf("moving %s to %s: %v", op.ID, to, err)
			return
		}
		mu.Lock()
		ops[i] = moved
		mu.Unlock()
	}
	// each moves the changes of idx along path, 8 at a time.
	each := func(idx []int, path func(i int) []rules.StepCode) {
		work := make(chan int)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					for _, to := range path(i) {
						detail := ""
						if to == rules.CreatePipelineFailed {
							detail = "the merge request pipeline failed"
						}
						move(i, to, detail)
					}
				}
			}()
		}
		for _, i := range idx {
			work <- i
		}
		close(work)
		wg.Wait()
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	failing := map[int]bool{7: true, 150: true}
	each(all, func(int) []rules.StepCode { return []rules.StepCode{rules.ApprovalSent} })
	var others []int
	for _, i := range all {
		if !failing[i] {
			others = append(others, i)
		}
	}
	// The others merge (the 2 still wait for approval: needs_person
	// again, told already), then the 2 fail (nothing moves: failed).
	each(others, func(int) []rules.StepCode { return []rules.StepCode{rules.CreateStarted, rules.HandleMerged} })
	// Both start before either fails, so the rollout is still moving when
	// the first fails and stops on failures with both failed.
	each([]int{7, 150}, func(int) []rules.StepCode { return []rules.StepCode{rules.CreateStarted} })
	each([]int{7, 150}, func(int) []rules.StepCode { return []rules.StepCode{rules.CreatePipelineFailed} })
	each([]int{7, 150}, func(int) []rules.StepCode { return []rules.StepCode{rules.CreateStarted, rules.HandleMerged} })
	each(all, func(int) []rules.StepCode { return []rules.StepCode{rules.CalledBack} })
	if t.Failed() {
		t.FailNow()
	}

	// Deliver every job the moves enqueued, as the worker does.
	snap, err := replicas[1].Export(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(WorkerConfig{Router: router, Log: replicas[0]})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range snap.Jobs {
		if j.Kind != KindDeliver {
			continue
		}
		var args DeliverArgs
		if err := json.Unmarshal(j.EncodedArgs, &args); err != nil {
			t.Fatal(err)
		}
		if err := w.Work(ctx, &river.Job[DeliverArgs]{JobRow: &rivertype.JobRow{Attempt: 1, MaxAttempts: MaxAttempts}, Args: args}); err != nil {
			t.Fatalf("delivering %s to %s: %v", args.Payload.IdempotencyKey, args.Destination, err)
		}
	}

	wantHook := []string{"needs_person rollout:ro-200:1", "failed rollout:ro-200:2", "merged rollout:ro-200:3", "applied rollout:ro-200:4"}
	if got := rc.keys["/hook"]; fmt.Sprint(got) != fmt.Sprint(wantHook) {
		t.Fatalf("the webhook got %v, want one summary per state: %v", got, wantHook)
	}
	if got := rc.keys["/elsewhere"]; len(got) != 0 {
		t.Errorf("a destination of another project got %v", got)
	}
	var failed Payload
	if err := json.Unmarshal(rc.got["/hook"][1], &failed); err != nil {
		t.Fatal(err)
	}
	ro := failed.Rollout
	if ro == nil || ro.ID != "ro-200" || ro.State != rules.RolloutFailed || ro.Total != n || ro.Failed != 2 || ro.Applied != 0 ||
		ro.Counts[rules.StatusMerged] != 198 || ro.Counts[rules.StatusCreateFailed] != 2 || len(ro.Attention) != 2 ||
		ro.Attention[0].Step != "CREATE_PIPELINE_FAILED" || ro.Attention[0].Detail != "the merge request pipeline failed" {
		t.Errorf("the failed summary's rollout: %s", rc.got["/hook"][1])
	}
	var done Payload
	if err := json.Unmarshal(rc.got["/hook"][3], &done); err != nil {
		t.Fatal(err)
	}
	if r := done.Rollout; r == nil || r.State != rules.RolloutDone || r.Applied != n || len(r.Attention) != 0 || r.Counts[rules.StatusValidated] != n {
		t.Errorf("the done summary's rollout: %s", rc.got["/hook"][3])
	}
	wantChat := []string{
		"changebot: rollout ro-200 stopped on failures: 0 of 200 applied, 2 failed: svc-007/prod (CREATE_PIPELINE_FAILED), svc-150/prod (CREATE_PIPELINE_FAILED)",
		"changebot: rollout ro-200 is done: 200 of 200 applied",
	}
	var gotChat []string
	for _, b := range rc.got["/chat"] {
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		gotChat = append(gotChat, m["text"])
	}
	// The two failures are listed oldest update first: either may lead.
	if len(gotChat) == 2 && strings.Contains(gotChat[0], "svc-150/prod (CREATE_PIPELINE_FAILED), svc-007") {
		gotChat[0] = wantChat[0]
	}
	if fmt.Sprint(gotChat) != fmt.Sprint(wantChat) {
		t.Errorf("Slack got\n%s\nwant\n%s", strings.Join(gotChat, "\n"), strings.Join(wantChat, "\n"))
	}
}
