package bot

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/platform/gitlab/gitlabfake"
)

// TestChangeWithoutMergeRequestCanBeCancelledAndResubmitted: a change that
// fails before its MR exists (GitLab refuses the robot's branch) is not stuck: an operator
// cancels it through the API, which frees the binding for a corrected
// submission; the actions need an operator token and refuse what does not
// apply.
func TestChangeWithoutMergeRequestCanBeCancelledAndResubmitted(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	startBot(t, env)
	post := func(path, token, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, env.BaseURL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	change := func(project string) string {
		return `{"subject_id":"svc","target_key":"prod","project":"` + project + `","title":"t","requested_by":"alice","files":[{"path":"a.yaml","content":"a: 1\n"}]}`
	}
	// The submission's checks pass (issue 9 defect 16); the create step
	// then meets a commit GitLab refuses (the robot may not push).
	env.GitLab.InjectFault(gitlabfake.Fault{Method: http.MethodPost, PathPattern: "/api/v4/projects/*/repository/commits", Status: 403})
	code, body := post("/api/v1/changes", demo.APIToken, change(demo.Project))
	if code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", code, body)
	}
	id := body[strings.Index(body, "op_") : strings.Index(body, "op_")+29]
	waitStep(t, env, id, "CREATE_FAILED", 60*time.Second)
	env.GitLab.ClearFaults()
	// No MR to comment /retry on: the hint names the API's actions.
	if v, err := demo.GetChange(context.Background(), env, id); err != nil || !strings.Contains(v.Hint, "/api/v1/changes/"+id+"/retry") ||
		!strings.Contains(v.Hint, "/cancel") || strings.Contains(v.Hint, "comment") {
		t.Fatalf("hint of a failed change without MR: %q (%v), want the API's retry and cancel", v.Hint, err)
	}
	if code, body := post("/api/v1/changes", demo.APIToken, change(demo.Project)); code != http.StatusConflict ||
		!strings.Contains(body, id) || !strings.Contains(body, "retry it or cancel it first") {
		t.Fatalf("resubmit while CREATE_FAILED: %d %s, want 409 naming %s and saying to retry or cancel it", code, body, id)
	}
	if code, _ := post("/api/v1/changes/"+id+"/retry", demo.APIToken, ""); code != http.StatusForbidden {
		t.Fatalf("retry with a submitter token: %d, want 403", code)
	}
	if code, body := post("/api/v1/changes/"+id+"/resume", demo.OperatorToken, ""); code != http.StatusConflict || !strings.Contains(body, "resume") {
		t.Fatalf("resume of a failed change: %d %s, want 409 with the reason", code, body)
	}
	if code, body := post("/api/v1/changes/"+id+"/cancel", demo.OperatorToken, ""); code != http.StatusOK || !strings.Contains(body, `"status":"CLOSED"`) {
		t.Fatalf("cancel: %d %s", code, body)
	}
	code, body = post("/api/v1/changes", demo.APIToken, change(demo.Project))
	if code != http.StatusAccepted {
		t.Fatalf("resubmit after cancel: %d %s", code, body)
	}
	id2 := body[strings.Index(body, "op_") : strings.Index(body, "op_")+29]
	if _, err := demo.FollowChange(context.Background(), env, id2, 60*time.Second, func(api.ChangeView) {}); err != nil {
		t.Fatal(err)
	}
}
