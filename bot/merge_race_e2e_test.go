package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/flows/rules"
	"changebot/store"
	"changebot/store/postgres/pgtest"
)

// mergeDuration is how long GitLab takes to answer a merge in the race
// tests (issue 10's acceptance: "merge answering after 2 s").
const mergeDuration = 2 * time.Second

// raceReplica is one in-process replica of the bot: its own App (River
// client, HTTP intake, GitLab adapter) on the shared schema, served on its
// own listener.
type raceReplica struct {
	app *App
	url string
	// log sees the replica's log records below info too (River's).
	log debugTap
}

// startReplica starts a replica named id on schema sc with env's config.
func startReplica(t *testing.T, env *demo.Env, sc pgtest.Schema, id string) raceReplica {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tap := newDebugTap(testLogger(t).Handler())
	app, err := NewApp(context.Background(), env.Config, &AppOpts{Logger: slog.New(tap).With("replica", id),
		Schema: sc.Name, Poll: demo.Poll, ClientID: id})
	if err != nil {
		t.Fatalf("NewApp %s: %v", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run %s: %v", id, err)
		}
		app.Close()
	})
	return raceReplica{app: app, url: "http://" + ln.Addr().String(), log: tap}
}

// hookFront is what the load balancer in front of the replicas does in the
// race: every request goes to replica a, and each MR pipeline success hook
// is also delivered to replica b `after` later as a second delivery (new
// Idempotency-Key and UUIDs: GitLab sent the hook twice).
type hookFront struct {
	a, b   string
	after  time.Duration
	copies sync.WaitGroup
	sent   atomic.Int32 // copies b answered 2xx
}

func (f *hookFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.Header.Get("X-Gitlab-Event") == "Pipeline Hook" && mrPipelineSucceeded(body) {
		h := r.Header.Clone()
		for _, k := range []string{"Idempotency-Key", "X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID"} {
			h.Set(k, "copy-"+h.Get(k))
		}
		f.copies.Go(func() {
			// Not a wait for a state: the race's input is GitLab sending
			// the hook a second time f.after later, while replica a
			// handles the first delivery.
			time.Sleep(f.after)
			if resp, err := forward(context.Background(), f.b, r.Method, r.URL.RequestURI(), h, body); err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode/100 == 2 {
					f.sent.Add(1)
				}
			}
		})
	}
	resp, err := forward(r.Context(), f.a, r.Method, r.URL.RequestURI(), r.Header, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func forward(ctx context.Context, base, method, uri string, h http.Header, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+uri, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = h.Clone()
	return http.DefaultClient.Do(req)
}

func mrPipelineSucceeded(body []byte) bool {
	var p struct {
		Attrs struct {
			Status string `json:"status"`
			Source string `json:"source"`
		} `json:"object_attributes"`
	}
	return json.Unmarshal(body, &p) == nil && p.Attrs.Status == "success" && p.Attrs.Source == "merge_request_event"
}

// mergeCallsBySHA counts the merge calls GitLab received for MR !iid, per
// head sha in the call, and how many of them GitLab answered 200.
func mergeCallsBySHA(env *demo.Env, iid int64) (calls, ok map[string]int) {
	calls, ok = map[string]int{}, map[string]int{}
	suffix := fmt.Sprintf("/merge_requests/%d/merge", iid)
	for _, c := range env.GitLab.Calls() {
		if c.Method != http.MethodPut || !strings.HasSuffix(c.Path, suffix) {
			continue
		}
		var b struct {
			SHA string `json:"sha"`
		}
		_ = json.Unmarshal(c.Body, &b)
		calls[b.SHA]++
		if c.Status == http.StatusOK {
			ok[b.SHA]++
		}
	}
	return calls, ok
}

// TestMergeRaceTwoReplicas is issue 10's acceptance race end to end: two
// replicas of the bot on one database, GitLab sending the MR pipeline's
// success hook twice, 50 ms apart, one delivery to each replica, and the
// merge answering after 2 s (the MR locked meanwhile). Exactly one merge
// call reaches GitLab for the head and succeeds, neither replica writes a
// failure (no failure step, no failure in the status comment, no other
// robot comment), the change goes on to VALIDATED, and its history shows
// the commit gate's claim of the merge of that head. Here the race is
// decided before the gate: the second delivery finds the change moved on
// (the transition's version check) and the merge job is one per step and
// version; TestMergeRaceRescuedJobLosesTheClaim is the race that reaches
// the gate.
func TestMergeRaceTwoReplicas(t *testing.T) {
	t.Parallel()
	r := startRace(t)
	env, sc, front := r.env, r.sc, r.front
	opID, err := demo.SubmitChange(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	v := waitStatus(t, env, opID, store.StatusValidated, 90*time.Second)
	front.copies.Wait()
	if front.sent.Load() == 0 {
		t.Fatal("replica b never accepted the second success hook")
	}
	var hooks int
	if err := sc.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_deliveries
		WHERE event = 'Pipeline Hook' AND processed_at IS NOT NULL
		  AND convert_from(body, 'UTF8')::jsonb->'object_attributes' @> '{"status": "success", "source": "merge_request_event"}'`).Scan(&hooks); err != nil {
		t.Fatal(err)
	}
	if hooks != 2 {
		t.Fatalf("%d MR pipeline success deliveries stored and processed; want the two of the race", hooks)
	}
	requireOneMerge(t, env, v)
}

// TestMergeRaceRescuedJobLosesTheClaim is the same race where it reaches
// the commit gate: the merge job runs twice at once, as River's at least
// once delivery allows (its rescuer makes a job available again while the
// replica running it is cut off or paused). Replica a has claimed the merge
// and its merge call is on its way to GitLab (held before GitLab sees it,
// so the MR still reads open) when the job is made available again and a
// second run reads the MR open and goes to claim the merge. The gate
// refuses that claim: the second run waits and reads the MR again, it
// makes no merge call and writes no failure; a's call then merges (2 s),
// and the change goes on to VALIDATED with one claim in its history.
// Without the gate the second run merges too and a's call answers 405.
func TestMergeRaceRescuedJobLosesTheClaim(t *testing.T) {
	t.Parallel()
	r := startRace(t)
	env, sc := r.env, r.sc
	inFlight, release := make(chan struct{}), make(chan struct{})
	var merges atomic.Int32
	env.GitLab.SetBeforeCall(func(method, path string) {
		if method != http.MethodPut || !strings.HasSuffix(path, "/merge") || merges.Add(1) != 1 {
			return
		}
		close(inFlight)
		select {
		case <-release:
		case <-time.After(time.Minute):
		}
	})
	opID, err := demo.SubmitChange(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-inFlight:
	case <-time.After(90 * time.Second):
		t.Fatal("no merge call")
	}
	ctx := context.Background()
	var jobID int64
	var first []string
	if err := sc.Pool.QueryRow(ctx, `SELECT id, attempted_by FROM river_job
		WHERE kind = $1 AND state = 'running' AND args->>'operation_id' = $2 AND (args->>'step')::int = $3`,
		rules.KindHandle, opID, int(rules.HandleApproved)).Scan(&jobID, &first); err != nil || len(first) == 0 {
		t.Fatalf("the running merge job: %v %v", first, err)
	}
	// The replica running it fetches no more jobs (River's graceful stop:
	// its merge call goes on), so that the second run is the other's.
	winner := first[len(first)-1]
	stopped := make(chan error, 1)
	go func() { stopped <- r.replicas[winner].app.jobs.Stop(ctx) }()
	// Each of its producers (one per queue) has left its fetch loop: River
	// logs that at debug before it waits for the producer's running jobs.
	waitFor(t, 30*time.Second, winner+"'s River producers to stop fetching", func() bool {
		log := r.replicas[winner].log
		started := log.count("producer: Run loop started")
		return started > 0 && log.count("producer: Entering shutdown loop") == started
	})
	if _, err := sc.Pool.Exec(ctx, `UPDATE river_job SET state = 'available', scheduled_at = now()
		WHERE id = $1 AND state = 'running'`, jobID); err != nil {
		t.Fatalf("making the running merge job available again: %v", err)
	}
	// The second run ends when it snoozes (claim refused) or, without the
	// gate, once its own merge call reached GitLab.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var snoozes int
		var by []string
		if err := sc.Pool.QueryRow(ctx, `SELECT coalesce((metadata->>'snoozes')::int, 0), coalesce(attempted_by, '{}')
			FROM river_job WHERE id = $1`, jobID).Scan(&snoozes, &by); err != nil {
			t.Fatal(err)
		}
		if snoozes > 0 || merges.Load() > 1 {
			if by[len(by)-1] == winner {
				t.Fatalf("the second run was on %s again: %v", winner, by)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the merge job never ran a second time")
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("stopping %s's job workers: %v", winner, err)
	}
	v := waitStatus(t, env, opID, store.StatusValidated, 90*time.Second)
	env.GitLab.SetBeforeCall(nil)
	requireOneMerge(t, env, v)
}

// race is the setting of the race tests: two replicas on one schema
// behind a hookFront, merges taking mergeDuration.
type race struct {
	env      *demo.Env
	sc       pgtest.Schema
	front    *hookFront
	replicas map[string]raceReplica // by River client id
}

// startRace starts the race's two replicas behind a hookFront that sends
// the second success hook 50 ms after the first.
func startRace(t *testing.T) race {
	t.Helper()
	env := newTestEnv(t, true, 100*time.Millisecond)
	env.GitLab.SetMergeDuration(env.Project.ID, mergeDuration)
	sc := pgtest.New(t)
	env.Config.DatabaseURL = pgtest.URL()
	a := startReplica(t, env, sc, "replica-a")
	b := startReplica(t, env, sc, "replica-b")
	front := &hookFront{a: a.url, b: b.url, after: 50 * time.Millisecond}
	srv := &http.Server{Handler: front, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(env.Listener) }()
	t.Cleanup(func() { _ = srv.Close() })
	return race{env: env, sc: sc, front: front, replicas: map[string]raceReplica{"replica-a": a, "replica-b": b}}
}

// requireOneMerge checks the race's outcome on the VALIDATED change v:
// one merge call for its head, answered 200; no failure anywhere; one
// merge claim of that head in its history.
func requireOneMerge(t *testing.T, env *demo.Env, v api.ChangeView) {
	t.Helper()
	iid := v.MergeRequest.IID
	head := headOf(v.Events)
	calls, ok := mergeCallsBySHA(env, iid)
	if len(calls) != 1 || calls[head] != 1 || ok[head] != 1 {
		t.Errorf("merge calls per head sha %v (answered 200: %v); want exactly one, for %s, answered 200", calls, ok, head)
	}
	requireNoFailureE2E(t, env, iid, v.Events)
	claims := mergeClaims(t, v.Events)
	if len(claims) != 1 || claims[0]["gate_step"] != "merge:"+head {
		t.Errorf("merge claims in the history: %v; want one claim of merge:%s", claims, head)
	}
}

// waitStatus polls the change until it reaches status and returns its view.
func waitStatus(t *testing.T, env *demo.Env, opID, status string, timeout time.Duration) api.ChangeView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var v api.ChangeView
	for time.Now().Before(deadline) {
		var err error
		v, err = demo.GetChange(context.Background(), env, opID)
		if err == nil && v.Status == status {
			return v
		}
		if err == nil && v.Terminal {
			t.Fatalf("change ended in %s (%s), want %s", v.Step.Name, v.Detail, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("change never reached %s: at %s (%s)", status, v.Step.Name, v.Detail)
	return v
}

// headOf returns the head sha the change merged (the HANDLE_MERGED
// transition's payload, else the last head recorded).
func headOf(events []api.Event) string {
	head := ""
	for _, ev := range events {
		var p struct {
			HeadSHA string `json:"head_sha"`
		}
		if json.Unmarshal(ev.Payload, &p) == nil && p.HeadSHA != "" {
			head = p.HeadSHA
		}
		if rules.StepCode(ev.ToStep) == rules.HandleMerged && head != "" {
			return head
		}
	}
	return head
}

// mergeClaims returns the payloads of the commit gate's merge_claimed
// events in events.
func mergeClaims(t *testing.T, events []api.Event) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range events {
		if ev.Type != store.EventClaim {
			continue
		}
		var p map[string]any
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p["action"] == "merge_claimed" {
			out = append(out, p)
		}
	}
	return out
}

// requireNoFailureE2E fails when the change passed through a failure or
// pending step, when the status comment shows one, or when the robot wrote
// any other comment on MR !iid.
func requireNoFailureE2E(t *testing.T, env *demo.Env, iid int64, events []api.Event) {
	t.Helper()
	for _, ev := range events {
		if s, ok := rules.Lookup(rules.StepCode(ev.ToStep)); ok && (s.Retryable() || s.Phase == rules.PhasePending) {
			t.Errorf("the change passed through %s", s.Code)
		}
	}
	if c := env.StatusComment(iid); strings.Contains(c, "FAILED") || strings.Contains(c, "NOT_MERGEABLE") || strings.Contains(c, "PENDING") {
		t.Errorf("the status comment reports a failure:\n%s", c)
	}
	if r := botReplies(env, iid); len(r) > 0 {
		t.Errorf("the robot commented besides its status comment: %+v", r)
	}
}
