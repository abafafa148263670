package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/demo"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// devA is the developer of issue 10 point 1's input.
const devA = "dev-a"

// sendHook posts a webhook body to the bot as GitLab would, under
// Idempotency-Key key, and returns the intake's result.
func sendHook(t *testing.T, env *demo.Env, event, key string, body []byte) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, env.BaseURL+"/webhooks/gitlab", bytes.NewReader(body))
	req.Header.Set("X-Gitlab-Event", event)
	req.Header.Set("X-Gitlab-Token", demo.WebhookSecret)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Result string }
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook answered %d", resp.StatusCode)
	}
	return out.Result
}

// robotWritesSince lists the writes a robot account (the bot or a reviewer
// robot) made to merge requests or the repository from call index from on:
// approve, merge, rebase, commit, MR update (a reopen is one), pipeline.
func robotWritesSince(env *demo.Env, from int) []string {
	robots := map[string]bool{demo.Robot: true}
	for _, r := range demo.Reviewers {
		robots[r.Name] = true
	}
	var out []string
	for _, c := range env.GitLab.Calls()[from:] {
		if !robots[c.User] {
			continue
		}
		p := c.Path
		switch {
		case c.Method == http.MethodPost && (strings.HasSuffix(p, "/approve") || strings.HasSuffix(p, "/pipelines") || strings.HasSuffix(p, "/repository/commits")),
			c.Method == http.MethodPut && (strings.HasSuffix(p, "/merge") || strings.HasSuffix(p, "/rebase")),
			c.Method == http.MethodPut && strings.Contains(p, "/merge_requests/") && !strings.Contains(p, "/notes"):
			out = append(out, c.User+" "+c.Method+" "+p)
		}
	}
	return out
}

// statusComment returns the status note's body on MR !iid ("" if none).
func statusComment(env *demo.Env, iid int64) string {
	snap, _ := env.GitLab.MergeRequest(env.Project.ID, iid)
	body := ""
	for _, n := range snap.Notes {
		if strings.HasPrefix(n.Body, "<!-- changebot:status") {
			body = n.Body
		}
	}
	return body
}

// waitStatusComment waits until the status comment on !iid holds every
// text of want.
func waitStatusComment(t *testing.T, env *demo.Env, iid int64, want ...string) {
	t.Helper()
	body, ok := pollStatusComment(10*time.Second, func() []string { return []string{statusComment(env, iid)} }, want...)
	if !ok {
		t.Fatalf("status comment does not show %q:\n%s", want, body)
	}
}

// TestPersonClosesThenOperatorResumes is issue 10 point 1 end to end with
// its input: the change waits for its running MR pipeline with no
// approvals; dev-a closes the MR (the Merge Request Hook action close,
// state closed, user dev-a; from then on GitLab answers closed and the
// merge 405); the MR pipeline's success hook arrives after the close, then
// the same delivery again, then once more with a new delivery id; dev-a
// comments /status. The change is MR_CLOSED naming dev-a, nothing robotic
// is written to the MR, the status comment says so. dev-a reopens the MR:
// nothing moves; dev-a's /resume is refused (operators only); the
// operator's /resume runs a new pipeline on the head, the reviewer robots
// approve that head, and the change reaches VALIDATED.
func TestPersonClosesThenOperatorResumes(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	env.GitLab.AddUser(devA, "dev-a-token")
	env.GitLab.AddMember(env.Project.ID, devA, gitlabfake.AccessDeveloper)
	env.GitLab.SetPipelineScript(env.Project.ID, gitlabfake.PipelineScript{MR: []string{"running"}})
	app, sc := startBot(t, env)
	opID, iid := runUntil(t, env, "CREATE_MR_OPENED")
	ctx := context.Background()
	if n := len(mustMR(t, env, iid).Approvals); n != 0 {
		t.Fatalf("%d approvals while the pipeline runs, want none", n)
	}
	from := len(env.GitLab.Calls())

	// dev-a closes !iid.
	dev, err := gitlab.New(gitlab.Config{BaseURL: env.GitLab.URL(), Token: "dev-a-token", RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.CloseMergeRequest(ctx, env.Project.ID, iid); err != nil {
		t.Fatal(err)
	}
	wantCloseHook(t, env, iid)
	if mr, err := dev.MergeRequest(ctx, env.Project.ID, iid, false); err != nil || mr.State != platform.MRStateClosed {
		t.Fatalf("GET the MR after the close: %+v, %v", mr.State, err)
	}
	if _, err := dev.Merge(ctx, env.Project.ID, iid, platform.MergeParams{SHA: mustMR(t, env, iid).SHA}); !errors.Is(err, platform.ErrNotMergeable) {
		t.Fatalf("merge of the closed MR: %v, want 405", err)
	}
	waitEvent(t, app, opID, func(ev store.Event) bool {
		return rules.StepCode(ev.ToStep) == rules.ClosedByPerson && ev.Actor == devA
	})

	// The MR pipeline's success hook, after the close (the run is
	// compressed: what matters is that it comes after the close), the
	// same delivery again, then under a new delivery id.
	success := successHookOf(t, env, iid)
	key := fmt.Sprintf("pipeline-success-%d", iid)
	if r := sendHook(t, env, gitlabfake.EventPipeline, key, success); r != "accepted" {
		t.Fatalf("success hook: %q", r)
	}
	if r := sendHook(t, env, gitlabfake.EventPipeline, key, success); r != "duplicate" {
		t.Fatalf("the same delivery again: %q, want duplicate", r)
	}
	if r := sendHook(t, env, gitlabfake.EventPipeline, key+"-new-delivery", success); r != "accepted" {
		t.Fatalf("the new delivery: %q", r)
	}
	status := env.GitLab.AddNoteAsUser(env.Project.ID, iid, devA, "/status")
	// The hooks' and the command's jobs have run, and no step job of the
	// change is left to poll.
	waitHandled(t, app, "idem:"+key, "idem:"+key+"-new-delivery")
	waitNotesHandled(t, env, app, status)
	waitStepJobsSettled(t, sc, opID, rules.ClosedByPerson)
	if v, _ := demo.GetChange(ctx, env, opID); v.Step.Name != "MR_CLOSED" || v.Status != store.StatusClosed {
		t.Fatalf("after the replayed success hooks the change is %s (%s), want MR_CLOSED (CLOSED)", v.Step.Name, v.Status)
	}
	waitStatusComment(t, env, iid, "MR_CLOSED", devA+" closed merge request", "/resume")
	if w := robotWritesSince(env, from); len(w) > 0 {
		t.Fatalf("robot writes after the close: %v", w)
	}

	// dev-a reopens it: nothing moves by itself.
	hooksBeforeReopen := len(env.GitLab.Webhooks())
	reopenAs(t, env, iid, "dev-a-token")
	// The reopen's Merge Request Hook is handled, and no step job runs.
	flushHooks(t, env)
	reopened := answeredHooks(env, hooksBeforeReopen, gitlabfake.EventMergeRequest)
	if len(reopened) == 0 {
		t.Fatal("the fake GitLab sent no Merge Request Hook for the reopen")
	}
	waitHandled(t, app, hookKeys(reopened)...)
	waitStepJobsSettled(t, sc, opID, rules.ClosedByPerson)
	if v, _ := demo.GetChange(ctx, env, opID); v.Step.Name != "MR_CLOSED" {
		t.Fatalf("the reopen moved the change to %s", v.Step.Name)
	}
	if w := robotWritesSince(env, from); len(w) > 0 {
		t.Fatalf("robot writes after the reopen: %v", w)
	}

	// dev-a may not /resume; the operator may.
	env.GitLab.AddNoteAsUser(env.Project.ID, iid, devA, "/resume")
	replies := waitReplies(t, env, iid, 1)
	if !strings.Contains(replies[len(replies)-1].Body, "operators only") {
		t.Fatalf("dev-a's /resume answered %q, want a refusal naming operators", replies[len(replies)-1].Body)
	}
	if v, _ := demo.GetChange(ctx, env, opID); v.Step.Name != "MR_CLOSED" {
		t.Fatalf("dev-a's /resume moved the change to %s", v.Step.Name)
	}
	env.GitLab.SetPipelineScript(env.Project.ID, gitlabfake.PipelineScript{Duration: 100 * time.Millisecond})
	resumeFrom := len(env.GitLab.Calls())
	env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Operator, "/resume")
	waitStep(t, env, opID, "CALLED_BACK", 60*time.Second)

	head := mustMR(t, env, iid).SHA
	pipelines, approves := 0, map[string]int{}
	for _, c := range env.GitLab.Calls()[resumeFrom:] {
		switch {
		case c.Method == http.MethodPost && strings.HasSuffix(c.Path, "/pipelines") && c.User == demo.Robot && c.Status < 300:
			pipelines++
		case c.Method == http.MethodPost && strings.HasSuffix(c.Path, "/approve"):
			approves[c.User]++
			if !strings.Contains(string(c.Body)+c.Query, head) {
				t.Fatalf("approve by %s without the head sha %s: %s", c.User, head, c.Body)
			}
		}
	}
	if pipelines != 1 {
		t.Fatalf("%d pipelines created after /resume, want 1", pipelines)
	}
	if len(approves) != len(demo.Reviewers) {
		t.Fatalf("approvals after /resume %v, want each of the %d reviewer robots", approves, len(demo.Reviewers))
	}
	if mr := mustMR(t, env, iid); mr.State != platform.MRStateMerged {
		t.Fatalf("MR state %s at VALIDATED", mr.State)
	}
}

func mustMR(t *testing.T, env *demo.Env, iid int64) gitlabfake.MRSnapshot {
	t.Helper()
	mr, ok := env.GitLab.MergeRequest(env.Project.ID, iid)
	if !ok {
		t.Fatalf("no MR !%d", iid)
	}
	return mr
}

// wantCloseHook asserts GitLab sent issue 10 point 1's close hook for
// !iid: object_attributes iid, action close, state closed; user dev-a.
func wantCloseHook(t *testing.T, env *demo.Env, iid int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, w := range env.GitLab.Webhooks() {
			if w.Event != gitlabfake.EventMergeRequest {
				continue
			}
			var h struct {
				ObjectAttributes struct {
					IID    int64  `json:"iid"`
					Action string `json:"action"`
					State  string `json:"state"`
				} `json:"object_attributes"`
				User struct {
					Username string `json:"username"`
				} `json:"user"`
			}
			if json.Unmarshal(w.Body, &h) == nil && h.ObjectAttributes.IID == iid && h.ObjectAttributes.Action == "close" &&
				h.ObjectAttributes.State == "closed" && h.User.Username == devA {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("GitLab sent no close hook for !%d by %s", iid, devA)
}

// successHookOf turns the running MR pipeline's Pipeline Hook of !iid into
// its success hook (status success, finished): what GitLab sends when the
// pipeline passes.
func successHookOf(t *testing.T, env *demo.Env, iid int64) []byte {
	t.Helper()
	for _, w := range env.GitLab.Webhooks() {
		if w.Event != gitlabfake.EventPipeline {
			continue
		}
		var h map[string]any
		if err := json.Unmarshal(w.Body, &h); err != nil {
			t.Fatal(err)
		}
		mr, _ := h["merge_request"].(map[string]any)
		attrs, _ := h["object_attributes"].(map[string]any)
		if mr == nil || attrs == nil || fmt.Sprint(mr["iid"]) != fmt.Sprint(iid) {
			continue
		}
		attrs["status"], attrs["detailed_status"] = "success", "passed"
		attrs["finished_at"] = time.Now().UTC().Format("2006-01-02 15:04:05 UTC")
		body, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	t.Fatalf("no MR pipeline hook for !%d", iid)
	return nil
}

// reopenAs reopens MR !iid with token (PUT ...?state_event=reopen).
func reopenAs(t *testing.T, env *demo.Env, iid int64, token string) {
	t.Helper()
	u := fmt.Sprintf("%s/api/v4/projects/%d/merge_requests/%d?state_event=reopen", env.GitLab.URL(), env.Project.ID, iid)
	req, _ := http.NewRequest(http.MethodPut, u, nil)
	req.Header.Set("PRIVATE-TOKEN", token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("reopening !%d: %d", iid, res.StatusCode)
	}
}
