// Package demo owns `changebot demo` and the environment the end-to-end
// tests share: the bot with the in-memory GitLab (gitlabfake) or GitHub
// (githubfake) and the stand-in approval system (approvalfake) around it,
// their fixed demo accounts and secrets, and a change carried from submit
// to VALIDATED through the REST API. Kept (`demo -keep`), it leaves a
// second change stopped by one of its switches (switches.go: a failed
// pipeline, a held approval, a conflicting or hanging rebase) for a
// person to see and act on, and serves the switches beside the in-memory
// GitLab's API. It is the only package besides tests
// that imports the fakes, and it never imports bot: the bot it runs is
// built by the StartFunc its caller passes (bot's constructor), so the
// demo speaks to it over HTTP alone, as a person would.
package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"changebot/api"
	"changebot/config"
	"changebot/database"
	"changebot/flows"
	"changebot/store"
)

// SchemaPrefix is the prefix of the PostgreSQL schema each demo run
// creates for itself (SchemaPrefix_<8 hex digits>), so that it never touches the
// tables of a real installation, nor those of another demo running at the
// same time on the same database.
const SchemaPrefix = "changebot_demo"

// newSchemaName returns a schema name of its own for one demo run.
func newSchemaName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return SchemaPrefix + "_" + hex.EncodeToString(b)
}

// App is the bot the demo runs (bot.App): it serves HTTP on a listener and
// works its jobs until the context ends, then releases its database.
type App interface {
	Run(ctx context.Context, ln net.Listener) error
	Close()
}

// AppParams are what the demo's bot is built with.
type AppParams struct {
	// Config is the bot's configuration (Env.Config).
	Config config.Config
	// Schema is the demo's PostgreSQL schema, empty on SQLite.
	Schema string
	// Poll is the demo's fast polling schedule (Poll).
	Poll   flows.PollConfig
	Logger *slog.Logger
}

// StartFunc builds the bot the demo runs (cli passes bot's constructor);
// it starts nothing: the demo calls Run.
type StartFunc func(ctx context.Context, p AppParams) (App, error)

// Opts configure Run.
type Opts struct {
	// StartFunc builds the bot; required.
	StartFunc StartFunc
	// DatabaseURL is a PostgreSQL connection string (the demo recreates
	// Schema in it) or sqlite://<path> (a new file).
	DatabaseURL string
	Timeout     time.Duration
	Out         io.Writer
	Logger      *slog.Logger
	// Schema is the schema recreated for the demo; empty means a new one
	// named SchemaPrefix_<random>, so that concurrent demos on one database
	// do not meet.
	Schema string
	// KeepData keeps the PostgreSQL schema when the demo ends (printing
	// its name); by default it is dropped at the end, whether the demo
	// passed, failed or was stopped.
	KeepData bool
	// Keep keeps the bot, the in-memory GitLab and the approval system
	// running after the first change, until ctx ends, for a person to try
	// more changes and comments (printing how).
	Keep bool
	// KeptFunc, when set, is called with the running demo's addresses once
	// Keep's instructions are printed.
	KeptFunc func(Info)
	// Listen, GitLabListen and ApprovalListen are where the bot, the
	// in-memory GitLab and the approval system listen (host:port, for
	// example 0.0.0.0:8080 in a container); empty means a free port on
	// 127.0.0.1.
	Listen, GitLabListen, ApprovalListen string
	// Platform is config.PlatformGitLab (the default when "": gitlabfake) or
	// config.PlatformGitHub (githubfake, listening on GitLabListen).
	Platform string
	// Fail is what goes wrong for the second change Keep submits, one of
	// FailModes: its pipeline fails once (FailPipeline, the default on
	// GitLab), its approval is held, its rebase conflicts or hangs; with
	// FailNone (the only one, and the default, on GitHub) there is none.
	// The change is left where the switch stopped it, for a person to see
	// under needs attention and act on.
	Fail string
}

// Info is where a kept demo runs.
type Info struct {
	// BotURL, GitLabURL and ApprovalURL are base URLs (http://127.0.0.1:port).
	BotURL, GitLabURL, ApprovalURL string
	// ProjectID and Project name the demo project; MRIID is the first
	// change's merge request.
	ProjectID int64
	Project   string
	MRIID     int64
	// Open is the second change, stopped by its switch (Opts.Fail); zero
	// without one.
	Open OpenChange
	// Export is the environment of the CLI and doctor (ExportEnv);
	// PasswordLeftOut says DATABASE_URL's password was left out of it.
	Export          [][2]string
	PasswordLeftOut bool
}

// Run carries one change from request to VALIDATED: it starts the
// in-memory GitLab, the stand-in approval system and the bot (HTTP and
// workers) on a fresh demo schema, submits a change through the REST API,
// prints every state the change reaches and the final status comment. It
// returns nil at VALIDATED, or an error naming the state the change was
// stuck in.
//
// A write to Out that fails (its reader went away: `changebot demo | head`)
// stops the demo as Ctrl-C does, so that the schema is still dropped; Run
// then returns an error saying so.
func Run(ctx context.Context, o Opts) (err error) {
	if o.StartFunc == nil {
		return errors.New("demo: Opts.StartFunc is required")
	}
	fail, err := failMode(o)
	if err != nil {
		return err
	}
	ctx, stopDemo := context.WithCancelCause(ctx)
	defer stopDemo(nil)
	out := &stopOnErrorWriter{w: o.Out, stop: stopDemo}
	defer func() {
		if werr := out.failed(); werr != nil {
			err = fmt.Errorf("stopped: writing the demo's output failed (%w)", werr)
		}
	}()
	target, err := config.ParseDatabaseTarget(o.DatabaseURL)
	if err != nil {
		return err
	}
	schema := o.Schema
	if schema == "" {
		schema = newSchemaName()
	}
	var atExit string // what happens to the data when a kept demo stops
	if target.Engine == config.EngineSQLite {
		// NewApp migrates the file; a schema is PostgreSQL's.
		schema = ""
		fmt.Fprintf(out, "changebot demo: database sqlite %s\n", target.Path)
		atExit = "the in-memory GitLab is thrown away then; the SQLite file " + target.Path + " is kept"
	} else {
		fmt.Fprintf(out, "changebot demo: database %s, schema %s (this run's own)\n", config.RedactDatabaseURL(o.DatabaseURL), schema)
		atExit = "the schema " + schema + " is dropped and the in-memory GitLab thrown away then"
		if o.KeepData {
			atExit = "the schema " + schema + " is kept (-keep-data) and the in-memory GitLab thrown away then"
		}
	}
	// The demo's schema is dropped when the demo ends, passed, failed or
	// stopped (after the bot below has stopped: this defer runs last),
	// unless KeepData.
	dropAtExit := false
	defer func() {
		switch {
		case dropAtExit && o.KeepData:
			fmt.Fprintf(out, "the demo's schema %s is kept; drop it with: DROP SCHEMA %s CASCADE\n", schema, schema)
		case dropAtExit:
			if err := database.DropSchema(context.WithoutCancel(ctx), o.DatabaseURL, schema); err != nil {
				fmt.Fprintf(out, "dropping the demo schema: %v\n", err)
			}
		}
	}()
	if target.Engine != config.EngineSQLite {
		dropAtExit = true // also what a failed reset left
		if err := database.ResetSchema(ctx, o.DatabaseURL, schema); err != nil {
			return err
		}
	}
	newEnv, platformName := func(a Addrs, url string, auto bool, d time.Duration, log *slog.Logger) (*Env, error) {
		return newEnvAt(a, url, auto, true, d, log)
	}, "GitLab"
	if o.Platform == config.PlatformGitHub {
		newEnv, platformName = NewGitHubEnvAt, "GitHub"
		atExit = strings.Replace(atExit, "GitLab", "GitHub", 1)
	}
	env, err := newEnv(Addrs{Bot: o.Listen, GitLab: o.GitLabListen, Approval: o.ApprovalListen},
		o.DatabaseURL, true, 300*time.Millisecond, o.Logger)
	if err != nil {
		return err
	}
	defer env.Close()
	app, err := o.StartFunc(ctx, AppParams{Config: env.Config, Schema: schema, Poll: Poll, Logger: o.Logger})
	if err != nil {
		return err
	}
	defer app.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx, env.Listener) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			fmt.Fprintf(out, "stopping the bot: %v\n", err)
		}
	}()

	fmt.Fprintf(out, "bot at %s, %s (in memory) at %s, approval system at %s\n", env.BaseURL, platformName, env.PlatformURL(), env.Approvals.URL())
	opID, err := SubmitChange(ctx, env)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "submitted change %s\n", opID)
	view, err := FollowChange(ctx, env, opID, o.Timeout, func(v api.ChangeView) {
		fmt.Fprintf(out, "  %-16s %-24s %s\n", v.Status, v.Step.Name, v.Hint)
	})
	if err != nil {
		return err
	}
	if view.MergeRequest != nil {
		// Give the coalesced status-note edit a moment to land.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if c := env.StatusComment(view.MergeRequest.IID); bytes.Contains([]byte(c), []byte(store.StatusValidated)) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		fmt.Fprintf(out, "\nstatus comment on %s:\n\n%s\n", view.MergeRequest.WebURL, env.StatusComment(view.MergeRequest.IID))
	}
	fmt.Fprintf(out, "change %s reached %s with %d events\n", opID, view.Status, len(view.Events))
	if !o.Keep {
		return nil
	}
	info := Info{BotURL: reachable(env.BaseURL), GitLabURL: reachable(env.PlatformURL()), ApprovalURL: reachable(env.Approvals.URL()),
		ProjectID: env.Project.ID, Project: env.Project.PathWithNamespace}
	if env.GitHub != nil {
		info.ProjectID, info.Project = env.Repo.ID, env.Repo.FullName
	}
	if view.MergeRequest != nil {
		info.MRIID = view.MergeRequest.IID
	}
	info.Export, info.PasswordLeftOut = ExportEnv(env.Config, o.DatabaseURL, schema)
	if fail != FailNone {
		if info.Open, err = openFailingChange(ctx, out, env, fail, o.Timeout); err != nil {
			return err
		}
	}
	if env.GitHub != nil {
		printGitHubKeepInstructions(out, info, atExit)
	} else {
		printKeepInstructions(out, info, atExit)
	}
	if o.KeptFunc != nil {
		o.KeptFunc(info)
	}
	<-ctx.Done()
	fmt.Fprintln(out, "stopping the demo")
	return nil
}

// stopOnErrorWriter passes writes to w until one fails; then it calls stop
// with the error (once), keeps it in err and drops every later write.
type stopOnErrorWriter struct {
	mu   sync.Mutex
	w    io.Writer
	stop context.CancelCauseFunc
	err  error
}

func (s *stopOnErrorWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	if err != nil {
		s.err = err
		s.stop(fmt.Errorf("writing the demo's output: %w", err))
	}
	return n, err
}

// failed returns the write error that stopped the demo, or nil.
func (s *stopOnErrorWriter) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// reachable turns a URL on the wildcard address (a container listening on
// 0.0.0.0:port) into one a person's browser or curl can use.
func reachable(u string) string {
	for _, wild := range []string{"//0.0.0.0:", "//[::]:"} {
		u = strings.Replace(u, wild, "//localhost:", 1)
	}
	return u
}

// failMode is o.Fail checked, with its default: FailPipeline on GitLab,
// FailNone on GitHub (whose in-memory platform has no switches), and
// FailNone without Keep.
func failMode(o Opts) (string, error) {
	github := o.Platform == config.PlatformGitHub
	switch {
	case !o.Keep:
		return FailNone, nil
	case o.Fail == "" && github:
		return FailNone, nil
	case o.Fail == "":
		return FailPipeline, nil
	case !slices.Contains(FailModes, o.Fail):
		return "", fmt.Errorf("demo: unknown failure %q: want one of %s", o.Fail, strings.Join(FailModes, ", "))
	case github && o.Fail != FailNone:
		return "", fmt.Errorf("demo: the failure switches (%s) need the in-memory GitLab, not -platform github", o.Fail)
	}
	return o.Fail, nil
}

// printKeepInstructions tells a person how to use the kept demo;
// atExit says what happens to its data at Ctrl-C. Every secret is printed:
// they are the demo's fixed fake ones (env.go), for doctor and signed
// webhooks. The comment lines act on the second change, which is still
// open (Info.Open), when it has a merge request.
func printKeepInstructions(out io.Writer, i Info, atExit string) {
	proj := url.PathEscape(i.Project)
	users := []string{}
	for _, u := range []struct{ name, role string }{{Requester, "requester, Developer"}, {Operator, "operator, Developer"},
		{Developer, "Developer"}, {Reporter, "Reporter"}, {Approver, "Developer"}} {
		users = append(users, fmt.Sprintf("%s (%s, token demo-%s-token)", u.name, u.role, u.name))
	}
	approves := "approves every request after 300 ms (unless held: see the switches below)"
	fmt.Fprintf(out, `
The demo keeps running until Ctrl-C (%[6]s).

  bot              %[1]s   REST API tokens: submitter %[4]s, operator %[5]s, viewer %[11]s (read-only)
  web pages        %[1]s/ui   log in with the viewer token %[11]s, or the operator token to act
                   webhook secret %[7]s (X-Gitlab-Token of POST %[1]s%[8]s)
                   approval callback secret %[9]s
  GitLab (memory)  %[2]s   robot token %[12]s; reviewer tokens %[10]s; project %[13]s (id %[14]d)
  approval system  %[3]s   %[15]s
  GitLab users     %[16]s
                   (the fake GitLab accepts any user name in the comment endpoint below)
`, i.BotURL, i.GitLabURL, i.ApprovalURL, APIToken, OperatorToken, atExit, WebhookSecret, config.GitLabWebhookPath, CallbackSecret,
		reviewerTokens(), ViewerToken, RobotToken, i.Project, i.ProjectID, approves, strings.Join(users, ", "))
	if i.Open.OperationID != "" {
		printOpenChange(out, i)
	}
	notes := func(iid int64) string {
		return fmt.Sprintf("%s/-/fake/projects/%s/merge_requests/%d/notes", i.GitLabURL, proj, iid)
	}
	first := max(i.MRIID, 1)
	if open := i.Open.MRIID; open != 0 {
		fmt.Fprintf(out, `
Comment on the open change's merge request !%[1]d as any user (/help, /status, /retry, /resume, /cancel reason…):
  curl -sS -X POST %[2]s -d '{"username": "%[3]s", "body": "/help"}'
  curl -sS -X POST %[2]s -d '{"username": "%[4]s", "body": "/cancel not needed after all"}'
Watch its status comment and the bot's replies:
  curl -sS '%[5]s/api/v4/projects/%[6]s/merge_requests/%[1]d/notes?sort=asc' -H 'PRIVATE-TOKEN: demo-alice-token'
`, open, notes(open), Developer, Operator, i.GitLabURL, proj)
	}
	fmt.Fprintf(out, `
The first change's merge request !%[1]d is finished (VALIDATED); it still answers /status and /help:
  curl -sS -X POST %[2]s -d '{"username": "%[3]s", "body": "/status"}'
  curl -sS '%[4]s/api/v4/projects/%[5]s/merge_requests/%[1]d/notes?sort=asc' -H 'PRIVATE-TOKEN: demo-alice-token'

Submit another change:
  curl -sS -X POST %[6]s/api/v1/changes -H 'Authorization: Bearer %[7]s' -H 'Content-Type: application/json' \
    -d '{"subject_id": "payments-api", "target_key": "prod/us-east-1", "project": "%[8]s", "title": "Raise payments-api replicas in us-east-1", "requested_by": "alice", "files": [{"path": "services/payments-api/us-east-1.yaml", "content": "replicas: 4\n"}]}'
Follow it (merge_request.iid is its MR):
  curl -sS %[6]s/api/v1/changes/<operation_id> -H 'Authorization: Bearer %[7]s'
`, first, notes(first), Developer, i.GitLabURL, proj, i.BotURL, APIToken, i.Project)
	printSwitches(out, i)
	printExports(out, i)
}

// SubmitChange submits the demo's change (payments-api replicas to 6 in
// platform/config) through POST /api/v1/changes with the submitter token
// and returns its operation id; any answer but 202 is an error.
func SubmitChange(ctx context.Context, env *Env) (string, error) {
	return submit(ctx, env, map[string]any{
		"subject_id": "payments-api", "target_key": "prod/eu-west-1", "project": Project,
		"title": "Raise payments-api replicas to 6", "requested_by": Requester,
		"files": []map[string]string{{"path": "services/payments-api/prod.yaml", "content": "replicas: 6\n"}},
	})
}

// FollowChange polls GET /api/v1/changes/{id}, calling onChange for every
// new step, until the change is terminal (nil error only for VALIDATED) or
// timeout passes (error naming the state it was in).
func FollowChange(ctx context.Context, env *Env, opID string, timeout time.Duration, onChange func(api.ChangeView)) (api.ChangeView, error) {
	deadline := time.Now().Add(timeout)
	var last api.ChangeView
	for {
		v, err := GetChange(ctx, env, opID)
		if err == nil && (v.Step.Code != last.Step.Code || last.OperationID == "") {
			onChange(v)
			last = v
		}
		if last.Terminal {
			if last.Status == store.StatusValidated {
				return last, nil
			}
			return last, fmt.Errorf("change %s ended in %s (%s): %s", opID, last.Status, last.Step.Name, last.Detail)
		}
		if time.Now().After(deadline) {
			return last, fmt.Errorf("change %s did not reach VALIDATED within %s: stuck in %s (%s) %s",
				opID, timeout, last.Status, last.Step.Name, last.Detail)
		}
		select {
		case <-ctx.Done():
			return last, context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// GetChange reads change opID through GET /api/v1/changes/{id} with the
// submitter token; any answer but 200 is an error.
func GetChange(ctx context.Context, env *Env, opID string) (api.ChangeView, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.BaseURL+"/api/v1/changes/"+opID, nil)
	req.Header.Set("Authorization", "Bearer "+APIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return api.ChangeView{}, err
	}
	defer resp.Body.Close()
	var v api.ChangeView
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("reading change: %d", resp.StatusCode)
	}
	return v, json.NewDecoder(resp.Body).Decode(&v)
}
