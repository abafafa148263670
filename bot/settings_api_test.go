package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/flows"
	"changebot/settings"
	"changebot/store/postgres"
	"changebot/store/postgres/pgtest"
)

// apiCall sends one API request to the bot of env and returns the status,
// the headers and the body.
func apiCall(t *testing.T, env *demo.Env, method, path, token string, body any) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, ok := body.(string)
		if !ok {
			raw, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			b = string(raw)
		}
		rd = strings.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, env.BaseURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data
}

// submitChange submits a one-file change for subject to the demo project
// and returns the status and the operation id (when accepted).
func submitTestChange(t *testing.T, env *demo.Env, subject string) (int, http.Header, string) {
	t.Helper()
	status, h, body := apiCall(t, env, http.MethodPost, "/api/v1/changes", demo.APIToken, map[string]any{
		"subject_id": subject, "target_key": "prod/eu-west-1", "project": demo.Project,
		"title": "Change " + subject, "requested_by": demo.Requester,
		"files": []map[string]string{{"path": "services/" + subject + "/prod.yaml", "content": "replicas: 2\n"}},
	})
	var out struct {
		OperationID string `json:"operation_id"`
	}
	_ = json.Unmarshal(body, &out)
	return status, h, out.OperationID
}

func TestSettingsAPI(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, time.Second)
	app, _ := startBot(t, env)

	tests := []struct {
		name, method, path, token string
		body                      any
		wantStatus                int
		wantBody                  []string
	}{
		{"get needs a token", http.MethodGet, "/api/v1/settings/flow.approval_first", "", nil, 401, []string{"bearer token"}},
		{"get default with a submitter token", http.MethodGet, "/api/v1/settings/flow.approval_first", demo.APIToken, nil, 200,
			[]string{`"key":"flow.approval_first"`, `"value":true`, `"source":"default"`, `"scope":"global"`, `"updated_at":null`}},
		{"get config value", http.MethodGet, "/api/v1/settings/poll.short_interval", demo.APIToken, nil, 200,
			[]string{`"value":"500ms"`, `"source":"config"`}},
		{"get unknown key", http.MethodGet, "/api/v1/settings/flow.aproval_first", demo.APIToken, nil, 400,
			[]string{`unknown setting \"flow.aproval_first\"`, "flow.approval_first"}},
		{"put needs an operator", http.MethodPut, "/api/v1/settings/flow.approval_first", demo.APIToken,
			map[string]any{"value": false}, 403, []string{"operator"}},
		{"put unknown key", http.MethodPut, "/api/v1/settings/no.such", demo.OperatorToken,
			map[string]any{"value": false}, 400, []string{"unknown setting"}},
		{"put invalid duration", http.MethodPut, "/api/v1/settings/pipeline.deadline", demo.OperatorToken,
			map[string]any{"value": "soon"}, 400, []string{"invalid value for pipeline.deadline", "positive duration"}},
		{"put wrong type", http.MethodPut, "/api/v1/settings/admission.max_active", demo.OperatorToken,
			map[string]any{"value": "100"}, 400, []string{"invalid value for admission.max_active", "whole number"}},
		{"put bad enum", http.MethodPut, "/api/v1/settings/approval.adapter", demo.OperatorToken,
			map[string]any{"value": "new"}, 400, []string{`one of \"legacy\", \"checklist\"`}},
		{"put without value", http.MethodPut, "/api/v1/settings/flow.approval_first", demo.OperatorToken,
			map[string]any{"project": demo.Project}, 400, []string{`\"value\" is required`}},
		{"put malformed", http.MethodPut, "/api/v1/settings/flow.approval_first", demo.OperatorToken,
			`{"value": tru`, 400, []string{"malformed JSON"}},
		{"put unknown field", http.MethodPut, "/api/v1/settings/flow.approval_first", demo.OperatorToken,
			map[string]any{"value": true, "scope": "global"}, 400, []string{`unknown field \"scope\"`}},
		// A bare value instead of {"value": …} said "…into Go value of type bot.settingRequest".
		{"put a bare value", http.MethodPut, "/api/v1/settings/pipeline.deadline", demo.OperatorToken,
			`"30m"`, 400, []string{"the body must be an object, not a string"}},
		{"put value of a wrong JSON type for the body", http.MethodPut, "/api/v1/settings/pipeline.deadline", demo.OperatorToken,
			`{"value":"30m","project":{}}`, 400, []string{"project must be a path or a numeric id"}},
		{"put a key twice", http.MethodPut, "/api/v1/settings/pipeline.deadline", demo.OperatorToken,
			`{"value":"30m","value":"45m"}`, 400, []string{"duplicate key value"}},
		{"put negative count", http.MethodPut, "/api/v1/settings/poll.short_count", demo.OperatorToken,
			map[string]any{"value": -1}, 400, []string{"invalid value for poll.short_count", "at least 0", "got -1"}},
		{"put negative duration", http.MethodPut, "/api/v1/settings/note.delay", demo.OperatorToken,
			map[string]any{"value": "-2s"}, 400, []string{"invalid value for note.delay", "positive duration"}},
		{"put reserve above the burst", http.MethodPut, "/api/v1/settings/gitlab.budget_reserve", demo.OperatorToken,
			map[string]any{"value": 300}, 400, []string{"gitlab.budget_reserve (300) must be below gitlab.budget_burst (250) in scope global", "nothing stored"}},
		{"put sweeper before the jobs' rescue", http.MethodPut, "/api/v1/settings/sweeper.after", demo.OperatorToken,
			map[string]any{"value": "1m"}, 400, []string{"jobs.rescue_after (5m) must be below sweeper.after (1m)"}},
		{"put min age above max age", http.MethodPut, "/api/v1/settings/reconcile.max_age", demo.OperatorToken,
			map[string]any{"value": "5m"}, 400, []string{"reconcile.min_age (10m) must be below reconcile.max_age (5m)"}},
		{"put long interval shorter than the short one", http.MethodPut, "/api/v1/settings/poll.short_interval", demo.OperatorToken,
			map[string]any{"value": "10m", "project": demo.Project}, 400, []string{"poll.short_interval (10m) must be at most poll.long_interval"}},
		{"put nanoseconds", http.MethodPut, "/api/v1/settings/deploy.deadline", demo.OperatorToken,
			map[string]any{"value": "1ns"}, 400, []string{"invalid value for deploy.deadline", "at least 1s"}},
		{"put not an access level", http.MethodPut, "/api/v1/settings/approval.min_access", demo.OperatorToken,
			map[string]any{"value": 25}, 400, []string{"invalid value for approval.min_access", "one of 0, 10, 20, 30, 40, 50"}},
		{"put global-only key for a project", http.MethodPut, "/api/v1/settings/admission.max_active", demo.OperatorToken,
			map[string]any{"value": 5, "project": demo.Project}, 400, []string{"admission.max_active is global only", "project:" + demo.Project}},
		{"put global-only key for a project id", http.MethodPut, "/api/v1/settings/sweeper.after", demo.OperatorToken,
			map[string]any{"value": "20m", "project": 42}, 400, []string{"sweeper.after is global only", "project:42"}},
		{"put global", http.MethodPut, "/api/v1/settings/pipeline.deadline", demo.OperatorToken,
			map[string]any{"value": "90m"}, 200, []string{`"value":"90m"`, `"source":"stored"`, `"scope":"global"`, `"updated_by":"` + api.TokenID(demo.OperatorToken) + `"`}},
		{"put project by id", http.MethodPut, "/api/v1/settings/pipeline.deadline", demo.OperatorToken,
			map[string]any{"value": "3h", "project": 42}, 400, []string{"pipeline.deadline cannot be set for project:42", "path"}},
		{"put project by path in another case", http.MethodPut, "/api/v1/settings/pipeline.deadline", demo.OperatorToken,
			map[string]any{"value": "3h", "project": "Grp/Other"}, 200, []string{`"value":"3h"`, `"scope":"project:grp/other"`}},
		{"get project value", http.MethodGet, "/api/v1/settings/pipeline.deadline?project=grp/other", demo.APIToken, nil, 200,
			[]string{`"value":"3h"`, `"scope":"project:grp/other"`, `"source":"stored"`}},
		{"get other project falls back to global", http.MethodGet, "/api/v1/settings/pipeline.deadline?project=grp/third", demo.APIToken, nil, 200,
			[]string{`"value":"90m"`, `"scope":"global"`}},
		// A numeric id names no scope a change reads pipeline.deadline in:
		// answering the global value would hide the project's own.
		{"get project by id", http.MethodGet, "/api/v1/settings/pipeline.deadline?project=42", demo.APIToken, nil, 400,
			[]string{"pipeline.deadline is never read for project:42", "path"}},
		{"list", http.MethodGet, "/api/v1/settings?project=GRP/OTHER", demo.APIToken, nil, 200,
			[]string{`"key":"admission.max_active"`, `"value":"3h"`}},
	}
	for _, tt := range tests { // in order: later cases read what earlier ones wrote
		status, _, body := apiCall(t, env, tt.method, tt.path, tt.token, tt.body)
		if status != tt.wantStatus {
			t.Errorf("%s: status %d, want %d (%s)", tt.name, status, tt.wantStatus, body)
			continue
		}
		for _, leak := range []string{"Go value", "Go struct", "settingRequest"} {
			if bytes.Contains(body, []byte(leak)) {
				t.Errorf("%s: body %s shows Go's %q", tt.name, body, leak)
			}
		}
		for _, w := range tt.wantBody {
			if !bytes.Contains(body, []byte(w)) {
				t.Errorf("%s: body %s lacks %s", tt.name, body, w)
			}
		}
	}

	// Refused writes stored nothing; accepted ones are audited.
	ctx := context.Background()
	rows, err := app.Store().ListSettings(ctx, app.Store().DB())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Errorf("stored settings %+v, want the two accepted writes", rows)
	}
	audit, err := app.Store().ListSettingAudit(ctx, app.Store().DB(), settings.PipelineDeadline, "project:grp/other")
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].UpdatedBy != api.TokenID(demo.OperatorToken) || string(audit[0].NewValue) != `"3h"` || audit[0].OldValue != nil {
		t.Errorf("audit %+v", audit)
	}
}

// TestApprovalFirstFlipAppliesToNextSubmission flips flow.approval_first
// through the API and finds the next submission MR-first, without restart.
func TestApprovalFirstFlipAppliesToNextSubmission(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, time.Second)
	startBot(t, env)
	ctx := context.Background()

	status, _, first := submitTestChange(t, env, "before-flip")
	if status != http.StatusAccepted {
		t.Fatalf("first submission: %d", status)
	}
	if status, _, body := apiCall(t, env, http.MethodPut, "/api/v1/settings/flow.approval_first", demo.OperatorToken,
		map[string]any{"value": false, "project": demo.Project}); status != http.StatusOK {
		t.Fatalf("PUT flow.approval_first: %d %s", status, body)
	}
	status, _, second := submitTestChange(t, env, "after-flip")
	if status != http.StatusAccepted {
		t.Fatalf("second submission: %d", status)
	}
	for _, c := range []struct {
		id   string
		want bool
	}{{first, true}, {second, false}} {
		v, err := demo.GetChange(ctx, env, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if v.ApprovalFirst != c.want {
			t.Errorf("change %s: approval_first %v, want %v", c.id, v.ApprovalFirst, c.want)
		}
	}
}

// TestProjectSettingsApplyToAnySpelling: approval in GitLab set for the
// project (its path, typed in another case) applies to a change that names
// the project by its numeric id or in upper case: the change keeps the
// path GitLab answers and its approval mode is the project's (in GitLab,
// so the merge request first), not the global one (the external system,
// approval first). Before, either spelling got the global policy.
func TestProjectSettingsApplyToAnySpelling(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, time.Second)
	app, _ := startBot(t, env)
	ctx := context.Background()
	for key, value := range map[string]string{"approval.provider": "gitlab", "approval.approvers": "carol"} {
		if status, _, body := apiCall(t, env, http.MethodPut, "/api/v1/settings/"+key, demo.OperatorToken,
			map[string]any{"value": value, "project": strings.ToUpper(demo.Project)}); status != http.StatusOK {
			t.Fatalf("PUT %s: %d %s", key, status, body)
		}
	}
	for i, spelling := range []string{strconv.FormatInt(env.Project.ID, 10), strings.ToUpper(demo.Project)} {
		subject := fmt.Sprintf("spelling-%d", i)
		status, _, body := apiCall(t, env, http.MethodPost, "/api/v1/changes", demo.APIToken, map[string]any{
			"subject_id": subject, "target_key": "prod/eu-west-1", "project": spelling,
			"title": "Change " + subject, "requested_by": demo.Requester,
			"files": []map[string]string{{"path": "services/" + subject + "/prod.yaml", "content": "replicas: 2\n"}},
		})
		if status != http.StatusAccepted {
			t.Fatalf("submitting as %q: %d %s", spelling, status, body)
		}
		var out struct {
			OperationID string `json:"operation_id"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		op, err := app.Store().GetOperation(ctx, app.Store().DB(), out.OperationID)
		if err != nil {
			t.Fatal(err)
		}
		if op.Project != demo.Project || op.ApprovalFirst {
			t.Errorf("submitted as %q: project %q, approval first %v; want %q, false (the project's approval in GitLab)",
				spelling, op.Project, op.ApprovalFirst, demo.Project)
		}
	}
}

// TestAdmissionControl: with admission.max_active 1 and one active change,
// a submission answers 503 with Retry-After, creates nothing and is counted.
func TestAdmissionControl(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, false, time.Second)
	env.Config.Settings = map[string]string{settings.AdmissionMaxActive: "1"}
	_, sc := startBot(t, env)
	ctx := context.Background()

	if status, _, _ := submitTestChange(t, env, "first"); status != http.StatusAccepted {
		t.Fatalf("first submission: %d", status)
	}
	status, h, _ := submitTestChange(t, env, "second")
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") != "30" {
		t.Fatalf("second submission: %d Retry-After %q, want 503 and 30", status, h.Get("Retry-After"))
	}
	var n int
	if err := sc.Pool.QueryRow(ctx, `SELECT count(*) FROM operations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d operations stored, want 1", n)
	}
	_, _, metrics := apiCall(t, env, http.MethodGet, "/metrics", "", nil)
	if !bytes.Contains(metrics, []byte("changebot_admission_rejected_total 1")) {
		t.Errorf("metrics lack changebot_admission_rejected_total 1")
	}

	// Raising the limit at runtime admits the next one.
	if status, _, body := apiCall(t, env, http.MethodPut, "/api/v1/settings/admission.max_active", demo.OperatorToken,
		map[string]any{"value": 2}); status != http.StatusOK {
		t.Fatalf("PUT admission.max_active: %d %s", status, body)
	}
	if status, _, _ := submitTestChange(t, env, "second"); status != http.StatusAccepted {
		t.Fatalf("submission after raising the limit: %d", status)
	}
}

// tableRow returns the cells of the row for key in the table printed by
// changebot settings (cells are separated by two or more spaces; an empty
// last cell is left out), nil when there is none.
func tableRow(out, key string) []string {
	for _, line := range strings.Split(out, "\n") {
		cells := regexp.MustCompile(` {2,}`).Split(strings.TrimSpace(line), -1)
		if cells[0] == key {
			return cells
		}
	}
	return nil
}

// TestSettingsCLI runs changebot settings get and set as a person would,
// against a migrated schema of the real database and with the config file
// serve reads (CHANGEBOT_CONFIG): tables by default and JSON with -json,
// values checked by settings.Validate, and every refused command stores
// nothing (the audit table does not grow). Cases run in order: later ones
// read what earlier ones wrote. Not parallel: it sets the environment.
func TestSettingsCLI(t *testing.T) {
	sc := pgtest.New(t)
	clearConfigEnv(t)
	t.Setenv("DATABASE_URL", sc.URL)
	t.Setenv("USER", "olivia")
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "changebot.yaml")
	if err := os.WriteFile(cfgFile, []byte("settings:\n  poll.short_count: 4\n  approval.provider: gitlab\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badFile := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badFile, []byte("settings:\n  poll.short_count: -4\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHANGEBOT_CONFIG", cfgFile)
	audited := func() int {
		var n int
		if err := sc.Pool.QueryRow(context.Background(), `SELECT count(*) FROM settings_audit`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		// rows maps a key to the cells its table row must start with.
		rows map[string][]string
		// want are substrings of stdout and stderr together.
		want []string
		// stored is whether the audit table grows by one.
		stored bool
	}{
		{name: "list is a table", args: []string{"get"},
			rows: map[string][]string{
				"KEY":                  {"KEY", "VALUE", "SCOPE", "SOURCE", "UPDATED BY", "UPDATED AT", "NOTES"},
				"merge.max_rounds":     {"merge.max_rounds", "3", "global", "default", "-", "-"},
				"approval.approvers":   {"approval.approvers", `""`, "global", "default"},
				"admission.max_active": {"admission.max_active", "1000", "global", "default", "-", "-", "global only"},
				"jobs.rescue_after":    {"jobs.rescue_after", "5m", "global", "default", "-", "-", "global only, read at start only"},
				"poll.short_count":     {"poll.short_count", "4", "global", "config"},
				"approval.provider":    {"approval.provider", "gitlab", "global", "config"}}},
		{name: "one key is a one-row table", args: []string{"get", "merge.max_rounds"},
			rows: map[string][]string{"merge.max_rounds": {"merge.max_rounds", "3", "global", "default"}}},
		{name: "json for machines", args: []string{"get", "-json", "poll.short_count"},
			want: []string{`"key": "poll.short_count"`, `"value": 4`, `"source": "config"`}},
		{name: "json list", args: []string{"get", "-json"}, want: []string{`[`, `"key": "flow.approval_first"`}},
		{name: "another config file with -config", args: []string{"get", "poll.short_count", "-config", badFile}, wantCode: 1,
			want: []string{"invalid value for poll.short_count", "at least 0", "-4"}},
		{name: "set bare duration, flags after", args: []string{"set", "rebase.deadline", "20m", "-project", "platform/config", "-by", "ops-olivia"},
			rows: map[string][]string{"rebase.deadline": {"rebase.deadline", "20m", "project:platform/config", "stored", "ops-olivia"}}, stored: true},
		{name: "get project value, flag first", args: []string{"get", "-project", "platform/config", "rebase.deadline"},
			rows: map[string][]string{"rebase.deadline": {"rebase.deadline", "20m", "project:platform/config", "stored", "ops-olivia"}}},
		{name: "get global value", args: []string{"get", "rebase.deadline"},
			rows: map[string][]string{"rebase.deadline": {"rebase.deadline", "15m", "global", "default"}}},
		{name: "set json bool", args: []string{"set", "-json", "flow.approval_first", "false"},
			want: []string{`"value": false`, `"updated_by": "cli:olivia"`}, stored: true},
		{name: "stored value wins over the config file", args: []string{"set", "poll.short_count", "6"},
			rows: map[string][]string{"poll.short_count": {"poll.short_count", "6", "global", "stored", "cli:olivia"}}, stored: true},
		{name: "value starting with - after --", args: []string{"set", "-project", "platform/config", "approval.approvers", "--", "-bot,carol"},
			rows: map[string][]string{"approval.approvers": {"approval.approvers", "-bot,carol", "project:platform/config", "stored"}}, stored: true},
		{name: "value starting with - without --", args: []string{"set", "approval.approvers", "-bot"}, wantCode: 2,
			want: []string{"flag provided but not defined: -bot", `goes after "--"`}},
		{name: "negative count after --", args: []string{"set", "poll.short_count", "--", "-3"}, wantCode: 1,
			want: []string{"invalid value for poll.short_count: want a whole number of at least 0, got -3"}},
		{name: "zero where at least one", args: []string{"set", "merge.max_rounds", "0"}, wantCode: 1,
			want: []string{"invalid value for merge.max_rounds: want a whole number of at least 1, got 0"}},
		{name: "negative duration", args: []string{"set", "pipeline.deadline", "--", "-1h"}, wantCode: 1,
			want: []string{"invalid value for pipeline.deadline", "positive duration"}},
		{name: "reserve above the burst", args: []string{"set", "gitlab.budget_reserve", "300"}, wantCode: 1,
			want: []string{"setting gitlab.budget_reserve refused, nothing stored", "gitlab.budget_reserve (300) must be below gitlab.budget_burst (250)"}},
		{name: "sweeper before the jobs' rescue", args: []string{"set", "sweeper.after", "2m"}, wantCode: 1,
			want: []string{"jobs.rescue_after (5m) must be below sweeper.after (2m)"}},
		{name: "min age above max age", args: []string{"set", "reconcile.min_age", "30h"}, wantCode: 1,
			want: []string{"reconcile.min_age (30h) must be below reconcile.max_age (24h)"}},
		{name: "long poll interval shorter than the short one", args: []string{"set", "poll.long_interval", "5s", "-project", "platform/config"}, wantCode: 1,
			want: []string{"poll.short_interval (15s) must be at most poll.long_interval (5s) in scope project:platform/config"}},
		{name: "nanoseconds where seconds are meant", args: []string{"set", "pipeline.deadline", "1ns"}, wantCode: 1,
			want: []string{"invalid value for pipeline.deadline: want a duration of at least 1s", "got 1ns"}},
		{name: "not a GitLab access level", args: []string{"set", "approval.min_access", "25"}, wantCode: 1,
			want: []string{"invalid value for approval.min_access: want one of 0, 10, 20, 30, 40, 50", "got 25"}},
		{name: "global-only key with a project", args: []string{"set", "admission.max_active", "5", "-project", "platform/config"}, wantCode: 1,
			want: []string{"admission.max_active is global only", "project:platform/config", "leave the project out"}},
		{name: "global-only key read for a project shows the global value", args: []string{"get", "commands.rate_limit", "-project", "platform/config"},
			rows: map[string][]string{"commands.rate_limit": {"commands.rate_limit", "20", "global", "default", "-", "-", "global only"}}},
		{name: "global-only key globally", args: []string{"set", "admission.max_active", "5"},
			rows: map[string][]string{"admission.max_active": {"admission.max_active", "5", "global", "stored"}}, stored: true},
		{name: "remove a stored value", args: []string{"set", "poll.short_count", "null"},
			rows: map[string][]string{"poll.short_count": {"poll.short_count", "4", "global", "config"}}, stored: true},
		{name: "unknown key", args: []string{"get", "no.such"}, wantCode: 1, want: []string{`unknown setting "no.such"`}},
		{name: "unknown key set", args: []string{"set", "no.such", "1"}, wantCode: 1, want: []string{`unknown setting "no.such"`}},
		{name: "missing value", args: []string{"set", "poll.short_count"}, wantCode: 2, want: []string{"wrong number of arguments", "Usage:"}},
		{name: "help", args: []string{"get", "-h"}, want: []string{"Usage:", "-json", "--"}},
		{name: "no verb", wantCode: 2, want: []string{"want get or set"}},
	}
	for _, tt := range tests {
		before := audited()
		var out, errOut bytes.Buffer
		code := cliMain(append([]string{"settings"}, tt.args...), &out, &errOut)
		if code != tt.wantCode {
			t.Errorf("%s: exit %d, want %d (%s%s)", tt.name, code, tt.wantCode, out.String(), errOut.String())
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out.String()+errOut.String(), w) {
				t.Errorf("%s: output %s%s lacks %s", tt.name, out.String(), errOut.String(), w)
			}
		}
		for key, cells := range tt.rows {
			if got := tableRow(out.String(), key); len(got) < len(cells) || !slices.Equal(got[:len(cells)], cells) {
				t.Errorf("%s: row %q, want it to start with %q; table:\n%s", tt.name, got, cells, out.String())
			}
		}
		if want := before + map[bool]int{true: 1}[tt.stored]; audited() != want {
			t.Errorf("%s: %d audited changes after, want %d", tt.name, audited(), want)
		}
	}
}

// TestSettingsDefaultsMatchFlows keeps the registry defaults equal to
// flows.DefaultPollConfig, which the engine uses without settings.
func TestSettingsDefaultsMatchFlows(t *testing.T) {
	t.Parallel()
	c, err := settings.NewCache(settings.CacheConfig{Store: &postgres.Store{}})
	if err != nil {
		t.Fatal(err)
	}
	got, want := pollFromSettings(c, ""), flows.DefaultPollConfig
	got.ApproveMaxRetries, want.ApproveMaxRetries = 0, 0 // registry 3 (issue 4), flows 5: see the lead's note
	if got != want {
		t.Errorf("settings defaults give %+v, flows.DefaultPollConfig is %+v", got, want)
	}
	if err := settings.ValidateInitial(initialSettings(nil, demo.Poll)); err != nil {
		t.Errorf("demo poll schedule as initial settings: %v", err)
	}
}
