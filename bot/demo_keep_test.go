package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"changebot/api"
	"changebot/config"
	"changebot/demo"
	"changebot/store/postgres/pgtest"
)

// TestDemoKeepServesMoreChanges: `changebot demo -keep` keeps running after
// its first change, prints its URLs and tokens, accepts a second change
// submitted over HTTP (as the printed curl does), and a comment posted
// through the fake GitLab's note endpoint reaches the bot, which answers
// on the merge request.
func TestDemoKeepServesMoreChanges(t *testing.T) {
	t.Parallel()
	schema := emptySchema(t) // RunDemo recreates it
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	kept := make(chan demo.Info, 1)
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- demo.Run(ctx, demo.Opts{StartFunc: StartDemo, DatabaseURL: pgtest.URL(), Schema: schema, Timeout: 60 * time.Second,
			Out: out, Logger: testLogger(t), Keep: true, KeptFunc: func(i demo.Info) { kept <- i }})
	}()
	var info demo.Info
	select {
	case info = <-kept:
	case err := <-done:
		t.Fatalf("the demo ended instead of staying up: %v\n%s", err, out.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("the demo did not reach its kept state:\n%s", out.String())
	}
	printed := out.String()
	for _, want := range []string{info.BotURL, info.GitLabURL, info.ApprovalURL, demo.APIToken, demo.OperatorToken,
		demo.WebhookSecret, demo.CallbackSecret, demo.Reviewers[0].Token, demo.Reviewers[1].Token,
		"log in with the viewer token " + demo.ViewerToken, info.BotURL + "/ui",
		"the schema " + schema + " is dropped",
		"/-/fake/projects/platform%2Fconfig/merge_requests/1/notes", "curl -sS -X POST " + info.BotURL + "/api/v1/changes"} {
		if !strings.Contains(printed, want) {
			t.Errorf("the instructions do not mention %q:\n%s", want, printed)
		}
	}

	// A second change, as the printed curl submits it.
	body := `{"subject_id": "payments-api", "target_key": "prod/us-east-1", "project": "platform/config", "title": "Raise payments-api replicas in us-east-1", "requested_by": "alice", "files": [{"path": "services/payments-api/us-east-1.yaml", "content": "replicas: 4\n"}]}`
	var submitted struct {
		OperationID string `json:"operation_id"`
	}
	httpJSON(t, "POST", info.BotURL+"/api/v1/changes", "Bearer "+demo.APIToken, body, http.StatusAccepted, &submitted)
	var view api.ChangeView
	deadline := time.Now().Add(60 * time.Second)
	for view.Status != "VALIDATED" {
		if time.Now().After(deadline) {
			t.Fatalf("the second change did not reach VALIDATED: %+v", view)
		}
		time.Sleep(100 * time.Millisecond)
		httpJSON(t, "GET", info.BotURL+"/api/v1/changes/"+submitted.OperationID, "Bearer "+demo.APIToken, "", http.StatusOK, &view)
	}
	if view.MergeRequest == nil || view.MergeRequest.IID == info.MRIID {
		t.Fatalf("the second change has no merge request of its own: %+v", view)
	}

	// dave asks for /help on it through the fake's endpoint; the bot answers.
	notes := fmt.Sprintf("/projects/%s/merge_requests/%d/notes", url.PathEscape(info.Project), view.MergeRequest.IID)
	httpJSON(t, "POST", info.GitLabURL+"/-/fake"+notes, "", `{"username": "dave", "body": "/help"}`, http.StatusCreated, nil)
	deadline = time.Now().Add(30 * time.Second)
	for {
		var got []struct {
			Body   string `json:"body"`
			Author struct {
				Username string `json:"username"`
			} `json:"author"`
		}
		httpJSON(t, "GET", info.GitLabURL+"/api/v4"+notes, "token:demo-alice-token", "", http.StatusOK, &got)
		replied := false
		for _, n := range got {
			replied = replied || (n.Author.Username == demo.Robot && strings.HasPrefix(n.Body, "Commands you may use"))
		}
		if replied {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reply of the bot to dave's /help among %+v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the kept demo ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the kept demo did not stop when its context ended")
	}
	// Its schema is dropped at exit, as the instructions said.
	pool, err := pgxpool.New(context.Background(), pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil || n != 0 {
		t.Errorf("schema %s after the kept demo stopped: %d (%v), want it dropped", schema, n, err)
	}
}

// TestDemoKeepOnSQLiteSaysTheFileIsKept: the kept demo on SQLite says at
// Ctrl-C the file stays (there is no schema to throw away).
func TestDemoKeepOnSQLiteSaysTheFileIsKept(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "changebot.db")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- demo.Run(ctx, demo.Opts{StartFunc: StartDemo, DatabaseURL: config.SQLiteURL(path), Timeout: 60 * time.Second,
			Out: out, Logger: testLogger(t), Keep: true, KeptFunc: func(demo.Info) { stop() }})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the kept demo: %v\n%s", err, out.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("the kept demo did not stop:\n%s", out.String())
	}
	want := "until Ctrl-C (the in-memory GitLab is thrown away then; the SQLite file " + path + " is kept)"
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "schema") {
		t.Errorf("instructions:\n%s\nwant %q and no schema", out.String(), want)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the SQLite file after the kept demo: %v", err)
	}
}

// TestConcurrentDemosOnOnePostgreSQL: two demos started at once on the
// same database each create a schema of their own (changebot_demo_<hex>),
// both reach VALIDATED, and each drops its schema at the end; with
// KeepData the schema stays and its name is printed.
func TestConcurrentDemosOnOnePostgreSQL(t *testing.T) {
	t.Parallel()
	admin, err := pgxpool.New(context.Background(), pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	schemaOf := regexp.MustCompile(`schema (` + demo.SchemaPrefix + `_[0-9a-f]{8}) \(this run's own\)`)
	type run struct {
		out  *syncBuffer
		err  error
		keep bool
	}
	runs := []*run{{out: &syncBuffer{}}, {out: &syncBuffer{}}, {out: &syncBuffer{}, keep: true}}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.err = demo.Run(context.Background(), demo.Opts{StartFunc: StartDemo, DatabaseURL: pgtest.URL(), Timeout: 60 * time.Second,
				Out: r.out, Logger: testLogger(t), KeepData: r.keep})
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, r := range runs {
		m := schemaOf.FindStringSubmatch(r.out.String())
		if r.err != nil || m == nil {
			t.Fatalf("demo %d: %v, schema %v\n%s", i, r.err, m, r.out.String())
		}
		schema := m[1]
		if seen[schema] {
			t.Errorf("demo %d shares schema %s with another", i, schema)
		}
		seen[schema] = true
		var n int
		if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if r.keep {
			t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
			if n != 1 || !strings.Contains(r.out.String(), "the demo's schema "+schema+" is kept; drop it with: DROP SCHEMA "+schema+" CASCADE") {
				t.Errorf("demo %d with KeepData: schema %s exists %d, output:\n%s", i, schema, n, r.out.String())
			}
			continue
		}
		if n != 0 {
			t.Errorf("demo %d left its schema %s", i, schema)
		}
	}
}

// httpJSON makes a request (auth "Bearer x" or "token:x" for PRIVATE-TOKEN),
// fails unless it answers want, and decodes the answer into v (if not nil).
func httpJSON(t *testing.T, method, u, auth, body string, want int, v any) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if tok, ok := strings.CutPrefix(auth, "token:"); ok {
		req.Header.Set("PRIVATE-TOKEN", tok)
	} else if auth != "" {
		req.Header.Set("Authorization", auth)
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

// TestFlagHelpExitsZero: -h prints a command's usage line and flags and is
// no failure.
func TestFlagHelpExitsZero(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"demo", "doctor", "setup", "serve"} {
		var out, errOut bytes.Buffer
		if code := cliMain([]string{cmd, "-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "usage:\n  changebot "+cmd) ||
			!strings.Contains(errOut.String(), "flags:\n  -") {
			t.Errorf("changebot %s -h: exit %d, stderr %q; want 0 and the flags", cmd, code, errOut.String())
		}
	}
	if code := cliMain([]string{"demo", "-no-such-flag"}, io.Discard, io.Discard); code == 0 {
		t.Error("an unknown flag must still fail")
	}
}
