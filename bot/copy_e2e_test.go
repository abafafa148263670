package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/cli"
	"changebot/config"
	"changebot/demo"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
	"changebot/store/postgres/pgtest"
	"changebot/templates"
)

// submitChangeOf submits a change of subject (its own binding and file).
func submitChangeOf(ctx context.Context, env *demo.Env, subject string) (string, error) {
	body, _ := json.Marshal(map[string]any{
		"subject_id": subject, "target_key": "prod/eu-west-1", "project": demo.Project,
		"title": "Raise " + subject + " replicas to 6", "requested_by": demo.Requester,
		"files": []map[string]string{{"path": "services/" + subject + "/prod.yaml", "content": "replicas: 6\n"}},
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.BaseURL+"/api/v1/changes", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+demo.APIToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out struct {
		OperationID string `json:"operation_id"`
	}
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(data, &out) != nil {
		return "", fmt.Errorf("submitting %s: %d %s", subject, resp.StatusCode, data)
	}
	return out.OperationID, nil
}

// runApp serves env on ln with the database env.Config names until the
// returned stop is called (stop waits for Run and closes the App).
func runApp(t *testing.T, env *demo.Env, ln net.Listener, schema string) (*App, func()) {
	t.Helper()
	app, err := NewApp(context.Background(), env.Config, &AppOpts{Logger: testLogger(t), Schema: schema, Poll: demo.Poll})
	if err != nil {
		t.Fatalf("NewApp on %s: %v", env.Config.DatabaseURL, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, ln) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		app.Close()
	}
	t.Cleanup(stop)
	return app, stop
}

// TestCopySQLiteToPostgresFinishesWaitingChanges is issue 11's acceptance
// of `changebot copy`: a SQLite installation served against gitlabfake with
// a finished change (VALIDATED) and two changes waiting for their MR
// pipelines is stopped and copied to PostgreSQL; the bot served on
// PostgreSQL finishes the waiting changes (GitLab's webhooks are dropped
// from their submission on, so only the copied polling jobs can carry
// them) and verify passes on all.
func TestCopySQLiteToPostgresFinishesWaitingChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := newTestEnv(t, true, 200*time.Millisecond)
	addr := env.Listener.Addr().String()
	dbPath := filepath.Join(t.TempDir(), "changebot.db")
	env.Config.DatabaseURL = "sqlite://" + dbPath
	_, stopSQLite := runApp(t, env, env.Listener, "")

	finished, err := submitChangeOf(ctx, env, "payments-api")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := demo.FollowChange(ctx, env, finished, 60*time.Second, func(api.ChangeView) {}); err != nil {
		t.Fatalf("on SQLite: %v", err)
	}
	// From here GitLab's webhooks are dropped: the waiting changes can move
	// only by the bot's polling jobs, which must survive the copy. Their
	// pipelines run for 3 s, long enough to stop the bot while they run.
	env.GitLab.SetPipelineScript(env.Project.ID, gitlabfake.PipelineScript{Duration: 3 * time.Second})
	env.GitLab.SetWebhookChaos(gitlabfake.WebhookChaos{DropRate: 1, Seed: 1})
	var waiting []string
	for _, subject := range []string{"orders-api", "users-api"} {
		id, err := submitChangeOf(ctx, env, subject)
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, id)
	}
	for _, id := range waiting {
		waitStep(t, env, id, "CREATE_MR_OPENED", 30*time.Second)
	}
	stopSQLite()

	sc := pgtest.New(t)
	var out, errb strings.Builder
	if code := cliMain([]string{"copy", "-from", "sqlite://" + dbPath, "-to", sc.URL}, &out, &errb); code != 0 {
		t.Fatalf("copy: exit %d\n%s%s", code, out.String(), errb.String())
	}
	t.Logf("copy:\n%s", out.String())
	if !regexp.MustCompile(`operations\s+3\n`).MatchString(out.String()) ||
		!regexp.MustCompile(`river_job\s+[1-9]\d*\n`).MatchString(out.String()) {
		t.Fatalf("copy carried other than 3 operations and their waiting jobs:\n%s", out.String())
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	env.Config.DatabaseURL = pgtest.URL()
	app, _ := runApp(t, env, ln, sc.Name)
	if app.db.Engine() != config.EnginePostgres {
		t.Fatalf("the second bot runs on %s, want postgres", app.db.Engine())
	}
	for _, id := range waiting {
		v, err := demo.FollowChange(ctx, env, id, 60*time.Second, func(api.ChangeView) {})
		if err != nil {
			t.Fatalf("on PostgreSQL: %v", err)
		}
		if v.Status != store.StatusValidated {
			t.Fatalf("%s: %s", id, v.Status)
		}
	}
	sent := 0
	for _, h := range env.GitLab.Webhooks() {
		if !h.Dropped && h.Status != 0 && h.Err == "" {
			sent++
		}
	}
	t.Logf("%d of %d webhooks reached a bot", sent, len(env.GitLab.Webhooks()))
	// One status comment per MR: the bot on PostgreSQL took over the notes
	// the one on SQLite wrote instead of writing second ones.
	deadline := time.Now().Add(10 * time.Second)
	for iid := int64(1); iid <= 3; iid++ {
		for {
			snap, _ := env.GitLab.MergeRequest(env.Project.ID, iid)
			n, validated := 0, false
			for _, note := range snap.Notes {
				if _, ok := templates.ParseMarker(note.Body); ok {
					n++
					validated = strings.Contains(note.Body, "<sub>VALIDATED · step")
				}
			}
			if n > 1 {
				t.Fatalf("!%d has %d status comments, want 1", iid, n)
			}
			if n == 1 && validated {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("!%d: %d status comments, none showing VALIDATED", iid, n)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var vout strings.Builder
	if err := cli.VerifyHistories(ctx, app.Store(), nil, &vout); err != nil || !strings.Contains(vout.String(), "3 operations checked, 0 broken") {
		t.Fatalf("verify on PostgreSQL: %v\n%s", err, vout.String())
	}
}
