package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"changebot/demo"
	"changebot/platform"
)

// TestForgedMergeWebhookMovesNothing is the tester's report end to end: a
// change waits for its approval (APPROVAL_SENT) on an open merge request;
// the recorded GitLab merge webhook (testdata/gitlab), edited to name that
// project and merge request, is posted to /webhooks/gitlab with the right
// token. Before, the change became MERGED on a merge commit that does not
// exist and could never leave. Now the delivery is processed (no_change),
// the change still waits for its approval, GitLab's MR is still open, and
// /cancel closes it as any change in progress.
func TestForgedMergeWebhookMovesNothing(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, time.Second)
	env.Config.Settings = map[string]string{"flow.approval_first": "false"} // the MR first: it exists while the approval waits
	app, sc := startBot(t, env)
	ctx := context.Background()
	status, _, opID := submitTestChange(t, env, "forged")
	if status != http.StatusAccepted {
		t.Fatalf("submitting: %d", status)
	}
	waitStep(t, env, opID, "APPROVAL_SENT", 30*time.Second)
	op, err := app.Store().GetOperation(ctx, app.Store().DB(), opID)
	if err != nil {
		t.Fatal(err)
	}

	raw, err := os.ReadFile("../testdata/gitlab/webhook-merge_request-merge.json")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	body["project"].(map[string]any)["id"] = op.ProjectID
	attrs := body["object_attributes"].(map[string]any)
	attrs["iid"], attrs["target_project_id"], attrs["source_project_id"] = op.MRIID, op.ProjectID, op.ProjectID
	forged, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, env.BaseURL+"/webhooks/gitlab", bytes.NewReader(forged))
	req.Header.Set("X-Gitlab-Event", "Merge Request Hook")
	req.Header.Set("X-Gitlab-Token", demo.WebhookSecret)
	req.Header.Set("Idempotency-Key", "forged-merge-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the webhook answered %d", resp.StatusCode)
	}
	outcome := ""
	for deadline := time.Now().Add(30 * time.Second); outcome == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := sc.Pool.QueryRow(ctx, `SELECT outcome FROM webhook_deliveries WHERE dedupe_key = $1`, "idem:forged-merge-1").Scan(&outcome); err != nil {
			t.Fatal(err)
		}
	}
	if outcome != "no_change" {
		t.Fatalf("forged merge delivery outcome %q, want no_change", outcome)
	}
	v, err := demo.GetChange(ctx, env, opID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Step.Name != "APPROVAL_SENT" {
		t.Fatalf("after the forged merge webhook the change is %s (%s), want APPROVAL_SENT", v.Step.Name, v.Detail)
	}
	if mr, ok := env.GitLab.MergeRequest(op.ProjectID, op.MRIID); !ok || mr.State != platform.MRStateOpened {
		t.Fatalf("GitLab's MR: %+v, want opened", mr)
	}
	if code, _, body := apiCall(t, env, http.MethodPost, "/api/v1/changes/"+opID+"/cancel", demo.OperatorToken, nil); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, body)
	}
}
