package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"changebot/api"
	"changebot/config"
	"changebot/flows/rules"
)

// What goes wrong for the kept demo's second change (Opts.Fail); each is
// one of the Switches.
const (
	// FailPipeline: its merge request pipeline fails once; a retry passes.
	FailPipeline = "pipeline"
	// FailApproval: the approval system holds its request until a person
	// approves or rejects it.
	FailApproval = "approval"
	// FailRebase: its merge finds the target branch moved and the rebase
	// conflicts, until the conflict is resolved and the change retried.
	FailRebase = "rebase"
	// FailHang: its merge finds the target branch moved and the rebase
	// never ends, until it is released.
	FailHang = "hang"
	// FailNone: no second change.
	FailNone = "none"
)

// FailModes are Opts.Fail's values, in the order the help lists them.
var FailModes = []string{FailPipeline, FailApproval, FailRebase, FailHang, FailNone}

// openChangeBody is the second change's request: another subject than the
// printed "submit another change" line, so that both may be open at once.
func openChangeBody() map[string]any {
	return map[string]any{
		"subject_id": "checkout-api", "target_key": "prod/eu-west-1", "project": Project,
		"title": "Raise checkout-api replicas to 4", "requested_by": Requester,
		"files": []map[string]string{{"path": "services/checkout-api/prod.yaml", "content": "replicas: 4\n"}},
	}
}

// OpenChange is the kept demo's second change, left where its switch
// stopped it.
type OpenChange struct {
	// Fail is the switch it met (FailPipeline, ...).
	Fail string
	// OperationID, Status, Step and Detail are the change as it stopped.
	OperationID, Status, Step, Detail string
	// MRIID is its merge request, 0 while it has none (a held approval
	// comes before the merge request in the approval-first order).
	MRIID int64
	// Ticket is the held approval request's ticket (FailApproval).
	Ticket string
}

// wantStep is where the second change stops with switch fail.
func wantStep(fail string) rules.StepCode {
	switch fail {
	case FailApproval:
		return rules.ApprovalSent
	case FailRebase:
		return rules.HandleRebaseConflict
	case FailHang:
		return rules.HandleRebasing
	}
	return rules.CreatePipelineFailed
}

// openFailingChange arms switch fail, submits the second change and
// follows it (printing its steps) until the switch has stopped it.
func openFailingChange(ctx context.Context, out io.Writer, env *Env, fail string, timeout time.Duration) (OpenChange, error) {
	sw := env.Switches
	switch fail {
	case FailPipeline:
		sw.FailNextPipeline()
	case FailApproval:
		sw.HoldNextApproval()
	case FailRebase:
		sw.ConflictNextRebase()
	case FailHang:
		sw.HangNextRebase()
	default:
		return OpenChange{}, fmt.Errorf("demo: unknown failure %q (want one of %s)", fail, strings.Join(FailModes, ", "))
	}
	id, err := submit(ctx, env, openChangeBody())
	if err != nil {
		return OpenChange{}, err
	}
	fmt.Fprintf(out, "\nsubmitted a second change %s, which the demo's %s switch stops:\n", id, fail)
	want := wantStep(fail)
	v, err := followUntil(ctx, env, id, timeout, func(v api.ChangeView) bool {
		switch {
		case v.Step.Code != int(want):
			return false
		case fail == FailApproval:
			return len(sw.Held()) > 0
		case fail == FailHang:
			return len(sw.State().HungMRs) > 0
		}
		return true
	}, func(v api.ChangeView) {
		fmt.Fprintf(out, "  %-16s %-24s %s\n", v.Status, v.Step.Name, v.Hint)
	})
	if err != nil {
		return OpenChange{}, fmt.Errorf("the second change did not stop at %s: %w", want, err)
	}
	oc := OpenChange{Fail: fail, OperationID: id, Status: v.Status, Step: v.Step.Name, Detail: v.Detail}
	if v.MergeRequest != nil {
		oc.MRIID = v.MergeRequest.IID
	}
	if held := sw.Held(); fail == FailApproval && len(held) > 0 {
		oc.Ticket = held[len(held)-1]
	}
	return oc, nil
}

// submit posts a change through POST /api/v1/changes with the submitter
// token and returns its operation id; any answer but 202 is an error.
func submit(ctx context.Context, env *Env, change map[string]any) (string, error) {
	body, _ := json.Marshal(change)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.BaseURL+"/api/v1/changes", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+APIToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("submitting the demo change: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		OperationID string `json:"operation_id"`
	}
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(data, &out) != nil {
		return "", fmt.Errorf("submitting the demo change: %d %s", resp.StatusCode, data)
	}
	return out.OperationID, nil
}

// followUntil polls GET /api/v1/changes/{id}, calling onChange for every
// new step, until done says so (nil), the change is terminal without it or
// timeout passes (an error naming the state it was in).
func followUntil(ctx context.Context, env *Env, opID string, timeout time.Duration, done func(api.ChangeView) bool,
	onChange func(api.ChangeView)) (api.ChangeView, error) {
	deadline := time.Now().Add(timeout)
	var last api.ChangeView
	for {
		v, err := GetChange(ctx, env, opID)
		if err == nil {
			if v.Step.Code != last.Step.Code || last.OperationID == "" {
				onChange(v)
			}
			last = v
			if done(v) {
				return v, nil
			}
		}
		if last.Terminal {
			return last, fmt.Errorf("change %s ended in %s (%s): %s", opID, last.Status, last.Step.Name, last.Detail)
		}
		if time.Now().After(deadline) {
			return last, fmt.Errorf("change %s is still %s (%s) after %s: %s", opID, last.Status, last.Step.Name, timeout, last.Detail)
		}
		select {
		case <-ctx.Done():
			return last, context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// printOpenChange says where the second change stopped, where to see it
// and what to do about it.
func printOpenChange(out io.Writer, i Info) {
	oc := i.Open
	notes := func(iid int64) string {
		return fmt.Sprintf("%s/-/fake/projects/%s/merge_requests/%d/notes", i.GitLabURL, url.PathEscape(i.Project), iid)
	}
	listed := map[string]string{FailPipeline: "it is listed, failed, with its reason", FailRebase: "it is listed, failed, with its reason",
		FailApproval: "it is listed as waiting for an approver", FailHang: "it is listed once past the rebase deadline"}[oc.Fail]
	fmt.Fprintf(out, `
The second change %[1]s is %[2]s (%[3]s)%[4]s.
  Needs attention: %[5]s/ui/attention (%[7]s); its page: %[5]s/ui/changes/%[1]s
  Follow it: curl -sS %[5]s/api/v1/changes/%[1]s -H 'Authorization: Bearer %[6]s'
`, oc.OperationID, oc.Status, oc.Step, detailSuffix(oc.Detail), i.BotURL, APIToken, listed)
	retry := fmt.Sprintf(`curl -sS -X POST %s -d '{"username": "%s", "body": "/retry"}'`, notes(oc.MRIID), Developer)
	apiRetry := fmt.Sprintf(`curl -sS -X POST %s/api/v1/changes/%s/retry -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{"reason": "%%s"}'`,
		i.BotURL, oc.OperationID, OperatorToken)
	switch oc.Fail {
	case FailPipeline:
		fmt.Fprintf(out, `  Its pipeline failed once; the next one passes. Retry it from its page, by a comment on !%[1]d as %[2]s:
    %[3]s
  or through the API (operator token):
    %[4]s
  and watch it reach VALIDATED.
`, oc.MRIID, Developer, retry, fmt.Sprintf(apiRetry, "the pipeline was flaky"))
	case FailRebase:
		fmt.Fprintf(out, `  Someone else's commit landed on the target branch before the merge and the rebase conflicts.
  Resolve the conflict (a developer's commit on the source branch), then retry it:
    curl -sS -X POST %[1]s%[2]s/resolve
    %[3]s
`, i.GitLabURL, SwitchesPath, retry)
	case FailHang:
		fmt.Fprintf(out, `  Someone else's commit landed on the target branch before the merge, and the rebase of !%[1]d hangs:
  after the rebase deadline (%[4]s here) the change is parked in HANDLE_REBASE_PENDING and shows under
  needs attention. Let the rebase finish, then, if it was parked, resume it as the operator %[5]s:
    curl -sS -X POST %[2]s%[3]s/release
    curl -sS -X POST %[6]s -d '{"username": "%[5]s", "body": "/resume"}'
`, oc.MRIID, i.GitLabURL, SwitchesPath, Poll.RebaseDeadline, Operator, notes(oc.MRIID))
	case FailApproval:
		fmt.Fprintf(out, `  The approval system holds its request %[1]s: nothing is opened before it is approved. Decide it:
    curl -sS -X POST %[2]s%[3]s/approve     # or %[3]s/reject
  or cancel the change with a reason (operator token):
    curl -sS -X POST %[4]s/api/v1/changes/%[5]s/cancel -H 'Authorization: Bearer %[6]s' -H 'Content-Type: application/json' -d '{"reason": "not now"}'
`, oc.Ticket, i.GitLabURL, SwitchesPath, i.BotURL, oc.OperationID, OperatorToken)
	}
}

// detailSuffix is ": <detail>" on one line, or "".
func detailSuffix(d string) string {
	d = strings.Join(strings.Fields(d), " ")
	if d == "" {
		return ""
	}
	return ": " + d
}

// printSwitches lists the switches, served on the in-memory GitLab.
func printSwitches(out io.Writer, i Info) {
	sw := i.GitLabURL + SwitchesPath
	fmt.Fprintf(out, `
Make the next change go wrong (the in-memory GitLab's demo switches; each acts once, on the next
change that gets there; then submit a change with the line above):
  hold the next approval       curl -sS -X POST %[1]s/hold-approval
    then decide it             curl -sS -X POST %[1]s/approve    (or %[1]s/reject)
  fail the next pipeline       curl -sS -X POST %[1]s/fail-pipeline      (once: a /retry passes)
  conflict the next rebase     curl -sS -X POST %[1]s/conflict-rebase
    then resolve it            curl -sS -X POST %[1]s/resolve    and comment /retry
  hang the next rebase         curl -sS -X POST %[1]s/hang-rebase
    then let it finish         curl -sS -X POST %[1]s/release    (and /resume if it was parked)
  what is armed and held       curl -sS %[1]s
`, sw)
}

// ExportEnv is the environment `changebot doctor`, list, history and
// settings need to reach the kept demo from another shell: its database
// (on PostgreSQL with the demo's schema as search_path, without the
// password, which pgx then reads from PGPASSWORD) and the configuration
// the demo's bot runs with. The second result names a password left out.
func ExportEnv(cfg config.Config, databaseURL, schema string) ([][2]string, bool) {
	dbURL, hadPassword := withoutPassword(withSearchPath(databaseURL, schema))
	var tokens []string
	for _, t := range cfg.APITokens {
		tokens = append(tokens, t.Role+":"+t.Token)
	}
	env := [][2]string{{"DATABASE_URL", dbURL}, {"CHANGEBOT_PLATFORM", config.PlatformGitLab}}
	if cfg.Platform == config.PlatformGitHub {
		env = [][2]string{{"DATABASE_URL", dbURL}, {"CHANGEBOT_PLATFORM", config.PlatformGitHub},
			{"CHANGEBOT_GITHUB_URL", reachable(cfg.GitHubURL)}, {"CHANGEBOT_GITHUB_TOKEN", cfg.GitHubToken}}
	} else {
		env = append(env, [2]string{"CHANGEBOT_GITLAB_URL", reachable(cfg.GitLabURL)}, [2]string{"CHANGEBOT_GITLAB_TOKEN", cfg.GitLabToken})
	}
	return append(env,
		[2]string{"CHANGEBOT_REVIEWER_TOKENS", strings.Join(cfg.ReviewerTokens, ",")},
		[2]string{"CHANGEBOT_WEBHOOK_SECRETS", strings.Join(cfg.WebhookSecrets, ",")},
		[2]string{"CHANGEBOT_CALLBACK_SECRET", cfg.CallbackSecret},
		[2]string{"CHANGEBOT_API_TOKENS", strings.Join(tokens, ",")},
		[2]string{"CHANGEBOT_APPROVAL_URL", reachable(cfg.ApprovalURL)},
		[2]string{"CHANGEBOT_EXTERNAL_URL", reachable(cfg.ExternalURL)},
		[2]string{"CHANGEBOT_OPERATORS", strings.Join(cfg.Operators, ",")},
	), hadPassword
}

// printExports prints ExportEnv as shell lines, with the commands they
// serve.
func printExports(out io.Writer, i Info) {
	fmt.Fprintf(out, "\nFor changebot doctor, list, history and settings in another shell (the demo's own values):\n")
	for _, kv := range i.Export {
		fmt.Fprintf(out, "  export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	if i.PasswordLeftOut {
		fmt.Fprintf(out, "  export PGPASSWORD=...   # your DATABASE_URL's password, left out above\n")
	}
	open := "<operation_id>"
	if i.Open.OperationID != "" {
		open = i.Open.OperationID
	}
	fmt.Fprintf(out, `  changebot doctor -project %[1]s
  changebot list -active true
  changebot history %[2]s
(changebot is bin/changebot from make build, or go run ./cmd/changebot.)
`, i.Project, open)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:,@=+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// withSearchPath is a PostgreSQL databaseURL that selects schema (its
// search_path); databaseURL itself for SQLite or without a schema.
func withSearchPath(databaseURL, schema string) string {
	if schema == "" {
		return databaseURL
	}
	if t, err := config.ParseDatabaseTarget(databaseURL); err != nil || t.Engine == config.EngineSQLite {
		return databaseURL
	}
	if !strings.Contains(databaseURL, "://") {
		return databaseURL + " search_path=" + schema // key=value connection string
	}
	u, err := url.Parse(databaseURL)
	if err != nil {
		return databaseURL
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// withoutPassword is databaseURL without its password (in the user info,
// a password query parameter or a key=value password), and whether it had
// one.
func withoutPassword(databaseURL string) (string, bool) {
	if !strings.Contains(databaseURL, "://") {
		var kept []string
		had := false
		for _, f := range strings.Fields(databaseURL) {
			if strings.HasPrefix(f, "password=") {
				had = true
				continue
			}
			kept = append(kept, f)
		}
		return strings.Join(kept, " "), had
	}
	u, err := url.Parse(databaseURL)
	if err != nil || u.Scheme == "sqlite" {
		return databaseURL, false
	}
	had := false
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			had = true
			u.User = url.User(u.User.Username())
		}
	}
	if q := u.Query(); q.Has("password") {
		had = true
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	return u.String(), had
}
