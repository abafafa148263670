package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/config"
	"changebot/demo"
	"changebot/ops"
)

// keepDemo runs `changebot demo -keep -fail fail` in-process on a SQLite
// file until the test ends, and returns where it runs once it printed its
// instructions.
func keepDemo(t *testing.T, fail string) (demo.Info, *syncBuffer) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	kept := make(chan demo.Info, 1)
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- demo.Run(ctx, demo.Opts{StartFunc: StartDemo, DatabaseURL: config.SQLiteURL(filepath.Join(t.TempDir(), "changebot.db")),
			Timeout: 60 * time.Second, Out: out, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
			Keep: true, Fail: fail, KeptFunc: func(i demo.Info) { kept <- i }})
	}()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the kept demo ended with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the kept demo did not stop when its context ended")
		}
	})
	select {
	case i := <-kept:
		return i, out
	case err := <-done:
		t.Fatalf("the demo ended instead of staying up: %v\n%s", err, out.String())
	case <-time.After(120 * time.Second):
		t.Fatalf("the demo did not reach its kept state:\n%s", out.String())
	}
	return demo.Info{}, nil
}

// call makes a request (token "" for none) and decodes a JSON answer
// into v (when not nil); it fails the test unless the answer is want.
func keptCall(t *testing.T, method, u, token, body string, want int, v any) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if tok, ok := strings.CutPrefix(token, "private:"); ok {
		req.Header.Set("PRIVATE-TOKEN", tok)
	} else if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, u, resp.StatusCode, data, want)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, u, data, err)
		}
	}
}

// keptWaitStatus polls change id through the API until it is status.
func keptWaitStatus(t *testing.T, i demo.Info, id, status string) api.ChangeView {
	t.Helper()
	var v api.ChangeView
	for deadline := time.Now().Add(60 * time.Second); ; {
		keptCall(t, http.MethodGet, i.BotURL+"/api/v1/changes/"+id, demo.APIToken, "", http.StatusOK, &v)
		if v.Status == status {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("change %s is %s (%s) %s, want %s", id, v.Status, v.Step.Name, v.Detail, status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// keptStatusComment is the bot's status comment on merge request iid.
func keptStatusComment(t *testing.T, i demo.Info, iid int64) string {
	t.Helper()
	var notes []struct {
		Body string `json:"body"`
	}
	keptCall(t, http.MethodGet, fmt.Sprintf("%s/api/v4/projects/%s/merge_requests/%d/notes?sort=asc", i.GitLabURL, url.PathEscape(i.Project), iid),
		"private:demo-alice-token", "", http.StatusOK, &notes)
	for _, n := range notes {
		if strings.Contains(n.Body, "changebot:status") {
			return n.Body
		}
	}
	return ""
}

// TestKeptDemoShowsAFailedChangeThatARetryFixes is issue 23 point 6's
// acceptance in-process: `demo -keep` leaves a second change whose
// pipeline failed (the switch fails one pipeline only), says so with its
// reason and how to retry it, prints an export block doctor runs with
// clean, and the printed /retry comment carries the change to VALIDATED.
func TestKeptDemoShowsAFailedChangeThatARetryFixes(t *testing.T) {
	t.Parallel()
	i, out := keepDemo(t, "")
	open := i.Open
	if open.Fail != demo.FailPipeline || open.Status != "CREATE_FAILED" || open.Step != "CREATE_PIPELINE_FAILED" || open.MRIID == 0 ||
		!strings.Contains(open.Detail, "failed") {
		t.Fatalf("the second change: %+v, want CREATE_FAILED at CREATE_PIPELINE_FAILED with its merge request and reason", open)
	}
	var failed api.ChangeView
	keptCall(t, http.MethodGet, i.BotURL+"/api/v1/changes/"+open.OperationID, demo.APIToken, "", http.StatusOK, &failed)
	if failed.Status != "CREATE_FAILED" || failed.Detail != open.Detail {
		t.Fatalf("the API says %s: %q, want CREATE_FAILED: %q", failed.Status, failed.Detail, open.Detail)
	}
	notes := fmt.Sprintf("%s/-/fake/projects/%s/merge_requests/%d/notes", i.GitLabURL, url.PathEscape(i.Project), open.MRIID)
	printed := out.String()
	for _, want := range []string{
		"The second change " + open.OperationID + " is CREATE_FAILED (CREATE_PIPELINE_FAILED): " + open.Detail,
		i.BotURL + "/ui/attention", i.BotURL + "/ui/changes/" + open.OperationID,
		"curl -sS -X POST " + notes + ` -d '{"username": "dave", "body": "/retry"}'`,
		"curl -sS -X POST " + i.BotURL + "/api/v1/changes/" + open.OperationID + "/retry -H 'Authorization: Bearer " + demo.OperatorToken + "'",
		i.GitLabURL + "/-/demo/fail-pipeline", i.GitLabURL + "/-/demo/hold-approval", i.GitLabURL + "/-/demo/conflict-rebase",
		i.GitLabURL + "/-/demo/hang-rebase", "export DATABASE_URL=", "export CHANGEBOT_GITLAB_URL=" + i.GitLabURL,
		"changebot doctor -project " + i.Project,
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("the instructions lack %q:\n%s", want, printed)
		}
	}
	keptWaitComment(t, i, open.MRIID, "**Warning:** this change has failed", fmt.Sprintf("| pipeline %s failed |", keptPipelineOf(open.Detail)))

	// doctor, with only the printed environment, finds nothing wrong.
	env := map[string]string{}
	for _, kv := range i.Export {
		env[kv[0]] = kv[1]
	}
	cfg, err := config.Load("", func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatalf("the printed environment does not load: %v", err)
	}
	checks := ops.RunDoctor(context.Background(), cfg, &ops.DoctorOpts{Projects: []string{i.Project}})
	if summary, fails := ops.DoctorSummary(checks); fails > 0 {
		t.Errorf("doctor with the printed environment: %s\n%v", summary, checks)
	}

	// The printed comment line retries it, and it goes through.
	keptCall(t, http.MethodPost, notes, "", `{"username": "dave", "body": "/retry"}`, http.StatusCreated, nil)
	done := keptWaitStatus(t, i, open.OperationID, "VALIDATED")
	if done.MergeRequest == nil || done.MergeRequest.IID != open.MRIID {
		t.Errorf("validated on %+v, want its merge request !%d", done.MergeRequest, open.MRIID)
	}
	keptWaitComment(t, i, open.MRIID, "| retried by dave |", fmt.Sprintf("| merge request !%d still open: waiting for a new pipeline |", open.MRIID), "VALIDATED")
}

// keptPipelineOf is the pipeline id in a detail "pipeline 5003 failed for …".
func keptPipelineOf(detail string) string {
	f := strings.Fields(detail)
	if len(f) < 2 {
		return detail
	}
	return f[1]
}

// keptWaitComment waits until the status comment of merge request iid (a
// coalesced edit, made a moment after the change moved) has every text of
// want.
func keptWaitComment(t *testing.T, i demo.Info, iid int64, want ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := keptStatusComment(t, i, iid)
		missing := ""
		for _, w := range want {
			if !strings.Contains(c, w) {
				missing = w
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status comment of !%d lacks %q:\n%s", iid, missing, c)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestKeptDemoSwitches: the switches served on the in-memory GitLab hold
// an approval until a person rejects it, and fail one pipeline only: the
// change after the failed one passes.
func TestKeptDemoSwitches(t *testing.T) {
	t.Parallel()
	i, _ := keepDemo(t, demo.FailApproval)
	open := i.Open
	if open.Status != "APPROVAL_SENT" || open.Ticket == "" {
		t.Fatalf("the second change: %+v, want APPROVAL_SENT with its ticket held", open)
	}
	sw := i.GitLabURL + demo.SwitchesPath
	var state demo.SwitchState
	keptCall(t, http.MethodGet, sw, "", "", http.StatusOK, &state)
	if len(state.HeldApprovals) != 1 || state.HeldApprovals[0] != open.Ticket {
		t.Fatalf("switch state %+v, want ticket %s held", state, open.Ticket)
	}
	keptCall(t, http.MethodPost, sw+"/reject", "", "", http.StatusOK, nil)
	keptWaitStatus(t, i, open.OperationID, "REJECTED")
	keptCall(t, http.MethodPost, sw+"/reject", "", "", http.StatusConflict, nil) // nothing held any more

	submitOne := func(target string) string {
		body := fmt.Sprintf(`{"subject_id": "payments-api", "target_key": %q, "project": %q, "title": "Raise replicas", "requested_by": "alice", "files": [{"path": "services/payments-api/%s.yaml", "content": "replicas: 4\n"}]}`,
			target, i.Project, target)
		var s struct {
			OperationID string `json:"operation_id"`
		}
		keptCall(t, http.MethodPost, i.BotURL+"/api/v1/changes", demo.APIToken, body, http.StatusAccepted, &s)
		return s.OperationID
	}
	keptCall(t, http.MethodPost, sw+"/fail-pipeline", "", "", http.StatusOK, &struct{}{})
	keptCall(t, http.MethodGet, sw, "", "", http.StatusOK, &state)
	if len(state.Armed) != 1 || state.Armed[0] != "fail-pipeline" {
		t.Errorf("switch state %+v, want fail-pipeline armed", state)
	}
	failed := keptWaitStatus(t, i, submitOne("us-east-1"), "CREATE_FAILED")
	if failed.Step.Name != "CREATE_PIPELINE_FAILED" {
		t.Errorf("the change after fail-pipeline is at %s, want CREATE_PIPELINE_FAILED", failed.Step.Name)
	}
	keptWaitStatus(t, i, submitOne("us-west-2"), "VALIDATED") // the next pipeline passes again
}
