package bot

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"changebot/demo"
	"changebot/flows/rules"
	"changebot/notify"
	"changebot/store/postgres/pgtest"
)

// TestRolloutThroughTheBot (issue 25 point 3): two changes submitted with
// one rollout_id and carried to VALIDATED through the fake GitLab notify a
// destination of every event only as their rollout: each delivery is a
// rollout summary (its delivery key the rollout's, its payload with the
// rollout object), never a change's own, each state once, the last one
// applied with both changes; GET /api/v1/rollouts/{id}, the list's
// rollout_id filter and changebot rollout show the progress.
func TestRolloutThroughTheBot(t *testing.T) {
	t.Parallel()
	rc := &notifyReceiver{got: map[string][]receivedNotification{}, statuses: map[string][]int{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	env := newTestEnv(t, true, 100*time.Millisecond)
	env.Config.Notifications = []notify.Destination{{Name: "all", Kind: notify.KindWebhook, URL: srv.URL + "/all", Secret: "rollout-e2e"}}
	_, sc := startBot(t, env)
	const rollout = "ro-e2e"
	var ids []string
	for _, region := range []string{"eu-west-1", "us-east-1"} {
		status, _, body := apiCall(t, env, http.MethodPost, "/api/v1/changes", demo.APIToken, map[string]any{
			"subject_id": "payments-api", "target_key": "prod/" + region, "project": demo.Project, "rollout_id": rollout,
			"title": "Raise payments-api replicas in " + region, "requested_by": demo.Requester,
			"files": []map[string]string{{"path": "services/payments-api/" + region + ".yaml", "content": "replicas: 6\n"}}})
		var out struct {
			OperationID string `json:"operation_id"`
		}
		if err := json.Unmarshal(body, &out); status != http.StatusAccepted || err != nil {
			t.Fatalf("submitting the %s change: %d %s", region, status, body)
		}
		ids = append(ids, out.OperationID)
	}
	for _, id := range ids {
		waitStatus(t, env, id, rules.StatusValidated, 90*time.Second)
	}
	applied := func() bool {
		for _, r := range rc.requests("/all") {
			if r.header.Get(notify.HeaderEvent) == string(notify.EventApplied) {
				return true
			}
		}
		return false
	}
	jobs := waitNotificationJobs(t, sc, applied)

	reqs := rc.requests("/all")
	seen := map[string]bool{}
	var last notify.Payload
	for _, r := range reqs {
		key := r.header.Get(notify.HeaderDelivery)
		var p notify.Payload
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(key, "rollout:"+rollout+":") || p.Rollout == nil || p.Rollout.ID != rollout {
			t.Errorf("a delivery that is not the rollout's summary: %s %s", key, r.body)
		}
		if seen[key] {
			t.Errorf("delivery %s sent twice", key)
		}
		seen[key] = true
		last = p
		if p.Rollout != nil {
			t.Logf("delivery %s %s: %s", key, p.Event, notify.RolloutText(*p.Rollout))
		}
	}
	if jobs["all"] != len(reqs) || len(reqs) > len(rules.RolloutToldStates()) {
		t.Errorf("%d jobs, %d deliveries: want one per told state, at most %d", jobs["all"], len(reqs), len(rules.RolloutToldStates()))
	}
	if last.Event != notify.EventApplied || last.Rollout == nil || last.Rollout.State != rules.RolloutDone || last.Rollout.Applied != 2 {
		t.Errorf("the last summary: %+v", last)
	}

	status, _, body := apiCall(t, env, http.MethodGet, "/api/v1/rollouts/"+rollout, demo.APIToken, nil)
	var v struct {
		State   string         `json:"state"`
		Total   int            `json:"total"`
		Applied int            `json:"applied"`
		Counts  map[string]int `json:"counts"`
	}
	if err := json.Unmarshal(body, &v); status != http.StatusOK || err != nil || v.State != "done" || v.Total != 2 || v.Applied != 2 ||
		v.Counts[rules.StatusValidated] != 2 {
		t.Errorf("GET /api/v1/rollouts/%s: %d %s", rollout, status, body)
	}
	if status, _, body := apiCall(t, env, http.MethodGet, "/api/v1/rollouts/ro-none", demo.APIToken, nil); status != http.StatusNotFound ||
		!strings.Contains(string(body), "no change was submitted with rollout_id ro-none") {
		t.Errorf("an unknown rollout: %d %s", status, body)
	}
	status, _, body = apiCall(t, env, http.MethodGet, "/api/v1/changes?rollout_id="+rollout, demo.APIToken, nil)
	if status != http.StatusOK || strings.Count(string(body), `"rollout_id":"`+rollout+`"`) != 2 {
		t.Errorf("the list of rollout %s: %d %s", rollout, status, body)
	}

	cfg := filepath.Join(t.TempDir(), "db.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("database_url: %q\n", pgtest.WithSearchPath(pgtest.URL(), sc.Name))), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	if code := cliMain([]string{"rollout", rollout, "-config", cfg}, &stdout, &stderr); code != 0 ||
		!strings.HasPrefix(stdout.String(), "rollout ro-e2e: done, 2 of 2 applied\n") || !strings.Contains(stdout.String(), "VALIDATED  2") {
		t.Errorf("changebot rollout: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := cliMain([]string{"rollout", "ro-none", "-config", cfg}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "no change was submitted with rollout_id ro-none") {
		t.Errorf("changebot rollout of an unknown id: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	// The changes of no rollout are no rollout: an empty id is a usage error.
	if code := cliMain([]string{"rollout", "", "-config", cfg}, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "the rollout id is empty") {
		t.Errorf("changebot rollout '': exit %d, stderr %q; want the usage error", code, stderr.String())
	}
}
