package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/config"
	"changebot/demo"
	"changebot/store/postgres/pgtest"
)

// benchPipeline is how long gitlabfake's pipelines run in
// BenchmarkChangeEndToEnd: two pipelines (the MR's and the deploy's) per
// change, so a floor of about 2×benchPipeline per change.
const benchPipeline = 50 * time.Millisecond

// BenchmarkChangeEndToEnd measures one change end to end, once per engine
// (engine=postgres: a fresh schema on TEST_DATABASE_URL; engine=sqlite: a
// fresh file): each iteration submits a change through POST
// /api/v1/changes and follows GET /api/v1/changes/{id} (every 100 ms, as
// `changebot demo` does) until it is VALIDATED, over real HTTP to
// gitlabfake and the stand-in approval system, like
// TestEndToEndReachesValidated. Changes run one after the other, so ns/op
// is the latency of a whole change (including gitlabfake's pipelines of
// benchPipeline each and the 100 ms polling of the follower), not the
// bot's throughput. Besides ns/op it reports changes/s and the GitLab calls
// per change (gitlab-calls/op: every call gitlabfake served, status note
// included, counted when the last change reaches VALIDATED, over b.N; a
// warm-up change runs before the clock starts). BENCHMARKS.md has measured figures.
//
//	go test ./bot/ -run '^$' -bench ChangeEndToEnd -benchtime 20x
func BenchmarkChangeEndToEnd(b *testing.B) {
	if testing.Short() {
		b.Skip("needs PostgreSQL; skipped under -short")
	}
	for _, engine := range testEngines {
		b.Run("engine="+engine, func(b *testing.B) { benchmarkChangeEndToEnd(b, engine) })
	}
}

func benchmarkChangeEndToEnd(b *testing.B, engine string) {
	quiet := slog.New(slog.DiscardHandler)
	env, err := demo.NewEnv(pgtest.URL(), true, benchPipeline, quiet)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(env.Close)
	poll := demo.Poll
	poll.ShortInterval = 10 * time.Second // webhooks end every wait, as in the end-to-end test
	poll.LongInterval = 10 * time.Second  // never shorter than the short one (settings refuse that)
	opts := &AppOpts{Logger: quiet, Poll: poll}
	if engine == config.EngineSQLite {
		env.Config.DatabaseURL = config.SQLiteURL(filepath.Join(b.TempDir(), config.DefaultDatabaseFile))
	} else {
		env.Config.DatabaseURL = pgtest.URL()
		opts.Schema = pgtest.New(b).Name
	}
	app, err := NewApp(context.Background(), env.Config, opts)
	if err != nil {
		b.Fatalf("NewApp: %v", err)
	}
	if !strings.HasPrefix(app.Database(), engine+" ") {
		b.Fatalf("the bot runs on %q, want %s", app.Database(), engine)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, env.Listener) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("Run: %v", err)
		}
		app.Close()
	})

	// One change before the clock starts: the first one also pays for
	// cold caches (the robot's GET /user, prepared statements, River's
	// first fetch), which ns/op with -benchtime 1s (b.N = 1) would mix in.
	if err := runBenchChange(ctx, env, -1); err != nil {
		b.Fatal(err)
	}
	calls := len(env.GitLab.Calls())
	byEndpoint := env.GitLab.CallsByEndpoint()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := runBenchChange(ctx, env, i); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "changes/s")
	b.ReportMetric(float64(len(env.GitLab.Calls())-calls)/float64(b.N), "gitlab-calls/op")
	logCallsByEndpoint(b, byEndpoint, env.GitLab.CallsByEndpoint(), b.N)
}

// logCallsByEndpoint logs the GitLab calls per change by endpoint
// (gitlabfake's Call.Endpoint) made between the two counts by n changes.
func logCallsByEndpoint(b *testing.B, before, after map[string]int, n int) {
	names := make([]string, 0, len(after))
	for e := range after {
		if after[e] > before[e] {
			names = append(names, e)
		}
	}
	sort.Strings(names)
	var sb strings.Builder
	for _, e := range names {
		fmt.Fprintf(&sb, "; %s %.2f", e, float64(after[e]-before[e])/float64(n))
	}
	b.Logf("GitLab calls per change by endpoint (%d changes)%s", n, sb.String())
}

// runBenchChange submits the n-th change and follows it to VALIDATED.
func runBenchChange(ctx context.Context, env *demo.Env, n int) error {
	opID, err := submitBenchChange(ctx, env, n)
	if err != nil {
		return err
	}
	_, err = demo.FollowChange(ctx, env, opID, time.Minute, func(api.ChangeView) {})
	return err
}

// submitBenchChange submits the demo change with content of its own (the
// n-th), so every change's merge request has a diff.
func submitBenchChange(ctx context.Context, env *demo.Env, n int) (string, error) {
	body, _ := json.Marshal(map[string]any{
		"subject_id": "payments-api", "target_key": "prod/eu-west-1", "project": demo.Project,
		"title": fmt.Sprintf("Bench change %d", n), "requested_by": demo.Requester,
		"files": []map[string]string{{"path": "services/payments-api/prod.yaml", "content": fmt.Sprintf("replicas: %d\n", n+10)}},
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.BaseURL+"/api/v1/changes", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+demo.APIToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("submitting change %d: %w", n, err)
	}
	defer resp.Body.Close()
	var out struct {
		OperationID string `json:"operation_id"`
	}
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(data, &out) != nil {
		return "", fmt.Errorf("submitting change %d: %d %s", n, resp.StatusCode, data)
	}
	return out.OperationID, nil
}
