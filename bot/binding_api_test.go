package bot

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
)

// postChange submits body to POST /api/v1/changes with the submitter token
// and returns the status and the decoded answer.
func postChange(t *testing.T, env *demo.Env, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, env.BaseURL+"/api/v1/changes", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	req.Header.Set("Authorization", "Bearer "+demo.APIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Errorf("answer %d %q is not JSON: %v", resp.StatusCode, raw, err)
	}
	return resp.StatusCode, out
}

// TestBindingOneChangeAtATime (issue 9, defects 1 and 2) over the REST API
// on real PostgreSQL: of concurrent first submissions for a new binding one
// answers 202 and the others 409 naming it; once that change is VALIDATED
// the next submission takes the binding (202).
func TestBindingOneChangeAtATime(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	startBot(t, env)
	change := `{"subject_id":"payments-api","target_key":"prod/eu-west-1","project":"` + demo.Project +
		`","title":"Raise replicas","requested_by":"alice","files":[{"path":"a.yaml","content":"replicas: 6\n"}]}`
	const n = 6
	codes := make([]int, n)
	answers := make([]map[string]any, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			codes[i], answers[i] = postChange(t, env, change)
		}()
	}
	close(start)
	wg.Wait()
	winner := ""
	for i, code := range codes {
		if code == http.StatusAccepted {
			if winner != "" {
				t.Fatalf("two concurrent first submissions answered 202: %v", codes)
			}
			winner, _ = answers[i]["operation_id"].(string)
		}
	}
	if winner == "" {
		t.Fatalf("no submission answered 202: %v %v", codes, answers)
	}
	for i, code := range codes {
		if code == http.StatusAccepted {
			continue
		}
		if code != http.StatusConflict || answers[i]["operation_id"] != winner {
			t.Fatalf("concurrent submission answered %d %v, want 409 naming %s", code, answers[i], winner)
		}
	}
	if _, err := demo.FollowChange(context.Background(), env, winner, 60*time.Second, func(api.ChangeView) {}); err != nil {
		t.Fatal(err)
	}
	code, answer := postChange(t, env, change)
	if code != http.StatusAccepted || answer["operation_id"] == winner {
		t.Fatalf("a change after the binding's change is VALIDATED: %d %v, want 202 with a new operation", code, answer)
	}
}
