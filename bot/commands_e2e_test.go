package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/commands"
	"changebot/demo"
	"changebot/flows"
	"changebot/flows/rules"
	"changebot/internal/fixture"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
	"changebot/templates"
)

// runUntil submits the demo change and waits until it reaches step.
func runUntil(t *testing.T, env *demo.Env, step string) (string, int64) {
	t.Helper()
	opID, err := demo.SubmitChange(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	waitStep(t, env, opID, step, 60*time.Second)
	v, err := demo.GetChange(context.Background(), env, opID)
	if err != nil || v.MergeRequest == nil {
		t.Fatalf("no merge request: %v", err)
	}
	return opID, v.MergeRequest.IID
}

// botNotes returns the notes the robot wrote that are not the status note.
func botReplies(env *demo.Env, iid int64) []gitlabfake.Note {
	snap, _ := env.GitLab.MergeRequest(env.Project.ID, iid)
	var out []gitlabfake.Note
	for _, n := range snap.Notes {
		if _, status := templates.ParseMarker(n.Body); n.Author == demo.Robot && !status && !n.System {
			out = append(out, n)
		}
	}
	return out
}

func waitReplies(t *testing.T, env *demo.Env, iid int64, n int) []gitlabfake.Note {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := botReplies(env, iid)
		if len(r) >= n {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bot replies, want %d", len(r), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitNotesHandled flushes the fake GitLab's webhooks and waits until the
// Note Hook of each of notes (object_attributes.id, action create) was
// answered and is handled (waitHandled): the positive sign that a comment
// was processed, replies and events included. It returns each note's
// delivery outcome, in the order of notes.
func waitNotesHandled(t *testing.T, env *demo.Env, app *App, notes ...gitlabfake.Note) []string {
	t.Helper()
	flushHooks(t, env)
	keyOf := map[int64]string{}
	for _, h := range answeredHooks(env, 0, gitlabfake.EventNote) {
		var body struct {
			ObjectAttributes struct {
				ID     int64  `json:"id"`
				Action string `json:"action"`
			} `json:"object_attributes"`
		}
		if err := json.Unmarshal(h.Body, &body); err != nil {
			t.Fatalf("decoding a Note Hook: %v", err)
		}
		if body.ObjectAttributes.Action == "create" {
			keyOf[body.ObjectAttributes.ID] = hookKey(h)
		}
	}
	keys := make([]string, len(notes))
	for i, n := range notes {
		k, ok := keyOf[n.ID]
		if !ok {
			t.Fatalf("the fake GitLab sent no answered Note Hook for note %d", n.ID)
		}
		keys[i] = k
	}
	got := waitHandled(t, app, keys...)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = got[k]
	}
	return out
}

func eventsOf(t *testing.T, app *App, opID string) []store.Event {
	t.Helper()
	ev, err := app.Store().ListEvents(context.Background(), app.Store().DB(), opID)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestRetryAfterFailedPipelineReachesValidated: the first MR pipeline
// fails, the requester comments /retry, the next pipeline passes.
func TestRetryAfterFailedPipelineReachesValidated(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	env.GitLab.SetPipelineScript(env.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed", "success"}, Duration: 100 * time.Millisecond})
	startBot(t, env)
	opID, iid := runUntil(t, env, "CREATE_PIPELINE_FAILED")
	env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Requester, "Fixed the runner.\n/retry")
	if _, err := demo.FollowChange(context.Background(), env, opID, 60*time.Second, func(api.ChangeView) {}); err != nil {
		t.Fatal(err)
	}
}

// TestResumeIsForOperators: a change parked as CREATE_PIPELINE_PENDING is
// refused for a developer (one reply, one event, no move) and continued for
// an operator.
func TestResumeIsForOperators(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	env.GitLab.SetPipelineScript(env.Project.ID, gitlabfake.PipelineScript{MR: []string{"running"}})
	app, _ := startBotWithPoll(t, env, shortDeadlines())
	opID, iid := runUntil(t, env, "CREATE_PIPELINE_PENDING")
	before := eventsOf(t, app, opID)

	refused := env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Developer, "/resume")
	replies := waitReplies(t, env, iid, 1)
	if !strings.Contains(replies[0].Body, "resume") {
		t.Fatalf("refusal reply does not name the command: %q", replies[0].Body)
	}
	if got := waitNotesHandled(t, env, app, refused); got[0] != commands.OutcomeRan {
		t.Fatalf("the refused /resume's delivery: outcome %q, want %q", got[0], commands.OutcomeRan)
	}
	after := eventsOf(t, app, opID)
	if len(after) != len(before)+1 || after[len(after)-1].Type != store.EventRefused || after[len(after)-1].Actor != demo.Developer {
		t.Fatalf("want exactly one refused event by %s, got %+v", demo.Developer, after[len(before):])
	}
	if v, _ := demo.GetChange(context.Background(), env, opID); v.Step.Name != "CREATE_PIPELINE_PENDING" {
		t.Fatalf("refused /resume moved the change to %s", v.Step.Name)
	}

	env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Operator, "/resume")
	waitEvent(t, app, opID, func(ev store.Event) bool {
		return ev.Actor == demo.Operator && rules.StepCode(ev.ToStep) == rules.CreateMROpened
	})
	if n := len(botReplies(env, iid)); n != 1 {
		t.Fatalf("%d replies after the operator's /resume, want still 1", n)
	}
}

func waitEvent(t *testing.T, app *App, opID string, match func(store.Event) bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, ev := range eventsOf(t, app, opID) {
			if match(ev) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("expected event never appeared")
}

// TestReporterRetryRefusedWithoutGitLabWrites: a Reporter's /retry on an MR
// into the protected default branch is refused and calls nothing on GitLab
// but the permission read and the reply.
func TestReporterRetryRefusedWithoutGitLabWrites(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	env.GitLab.SetPipelineScript(env.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed"}})
	app, sc := startBot(t, env)
	opID, iid := runUntil(t, env, "CREATE_PIPELINE_FAILED")
	// The change has settled: its webhooks are handled and no step job of
	// it is due.
	flushHooks(t, env)
	waitHandled(t, app, hookKeys(answeredHooks(env, 0, ""))...)
	waitStepJobsSettled(t, sc, opID, rules.CreatePipelineFailed)
	calls0 := len(env.GitLab.Calls())
	note := env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Reporter, "/retry")
	waitReplies(t, env, iid, 1)
	// The /retry was processed, and left no step job behind.
	waitNotesHandled(t, env, app, note)
	waitStepJobsSettled(t, sc, opID, rules.CreatePipelineFailed)
	for _, c := range env.GitLab.Calls()[calls0:] {
		write := c.Method != http.MethodGet
		reply := c.Method == http.MethodPost && strings.HasSuffix(c.Path, "/notes")
		noteEdit := c.Method == http.MethodPut && strings.Contains(c.Path, "/notes/")
		if write && !reply && !noteEdit {
			t.Errorf("refused /retry caused %s %s", c.Method, c.Path)
		}
	}
	if v, _ := demo.GetChange(context.Background(), env, opID); v.Step.Name != "CREATE_PIPELINE_FAILED" {
		t.Fatalf("refused /retry moved the change to %s", v.Step.Name)
	}
	evs := eventsOf(t, app, opID)
	if last := evs[len(evs)-1]; last.Type != store.EventRefused || last.Actor != demo.Reporter {
		t.Fatalf("last event %+v, want a refusal by %s", last, demo.Reporter)
	}
}

// TestNoteRunsOnceNeverOnEditNeverForBots: a note delivered twice acts
// once; its edit acts never; the bot's own reply and status-note edits
// replayed 10 times as Note Hooks cause nothing.
func TestNoteRunsOnceNeverOnEditNeverForBots(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	env.GitLab.SetPipelineScript(env.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed"}})
	app, _ := startBot(t, env)
	opID, iid := runUntil(t, env, "CREATE_PIPELINE_FAILED")
	note := env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Developer, "/help")
	waitReplies(t, env, iid, 1)
	// Every webhook so far (the note, the reply, the status note's edits)
	// is handled before the events are counted.
	flushHooks(t, env)
	waitHandled(t, app, hookKeys(answeredHooks(env, 0, ""))...)

	// resend posts h again under key and returns the key (a stored
	// delivery's dedupe key) with the intake's result.
	type resent struct{ key, result string }
	var sent []resent
	resend := func(h gitlabfake.SentWebhook, key string) {
		sent = append(sent, resent{"idem:" + key, sendHook(t, env, h.Event, key, h.Body)})
	}
	var userNote []gitlabfake.SentWebhook
	var botNotes []gitlabfake.SentWebhook
	for _, h := range env.GitLab.Webhooks() {
		if h.Event != gitlabfake.EventNote {
			continue
		}
		if bytes.Contains(h.Body, []byte(`"username":"`+demo.Robot+`"`)) {
			botNotes = append(botNotes, h)
		} else if bytes.Contains(h.Body, []byte(`"id":`+itoa(note.ID)+`,`)) {
			userNote = append(userNote, h)
		}
	}
	if len(userNote) != 1 || len(botNotes) == 0 {
		t.Fatalf("found %d deliveries of the user's note and %d of the bot's", len(userNote), len(botNotes))
	}
	before := eventsOf(t, app, opID)
	// The same note again under another hook's key (several hooks, resend).
	resend(userNote[0], "another-hook-1")
	// The bot's own notes (help reply, status note edits), 10 times each.
	for i := range 10 {
		for j, h := range botNotes {
			resend(h, "bot-replay-"+itoa(int64(i))+"-"+itoa(int64(j)))
		}
	}
	// An edit of the user's note.
	hooksBeforeEdit := len(env.GitLab.Webhooks())
	req, _ := http.NewRequest(http.MethodPut, env.GitLab.URL()+"/api/v4/projects/"+itoa(env.Project.ID)+
		"/merge_requests/"+itoa(iid)+"/notes/"+itoa(note.ID), strings.NewReader(`{"body":"/help\n/status"}`))
	req.Header.Set("PRIVATE-TOKEN", "demo-dave-token")
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("editing the note: %v", err)
	} else {
		resp.Body.Close()
	}
	// Each input was processed before nothing is asserted: a resent
	// delivery the intake stored has run its job (the user's note again:
	// already seen; the bot's notes: ignored), one it answered without
	// storing (the bot's note edits) needs no job; the edit's hook was
	// answered 200 (the intake ignores edits) and, were it stored, handled.
	flushHooks(t, env)
	edits := answeredHooks(env, hooksBeforeEdit, gitlabfake.EventNote)
	if len(edits) == 0 {
		t.Fatal("the fake GitLab sent no Note Hook for the edit")
	}
	keys := hookKeys(edits)
	for _, r := range sent {
		if r.result == "accepted" {
			keys = append(keys, r.key)
		}
	}
	outcomes := waitHandled(t, app, keys...)
	if got := outcomes["idem:another-hook-1"]; got != commands.OutcomeSeen {
		t.Errorf("the user's note under another key: outcome %q, want %q", got, commands.OutcomeSeen)
	}
	for k, got := range outcomes {
		if k != "idem:another-hook-1" && got != "" && got != commands.OutcomeIgnored {
			t.Errorf("delivery %s: outcome %q, want %q (a bot's note or an edit)", k, got, commands.OutcomeIgnored)
		}
	}
	if n := len(botReplies(env, iid)); n != 1 {
		t.Fatalf("%d bot replies, want 1 (duplicates, edits or the bot's own notes acted)", n)
	}
	if after := eventsOf(t, app, opID); len(after) != len(before) {
		t.Fatalf("events grew from %d to %d", len(before), len(after))
	}
	// A note without a command is answered at intake and not stored; one
	// that may hold a command is stored (issue 12: serve wires the command
	// parser into the intake).
	plain := fixture.GitLab(t, "webhook-note-mr.json") // "This MR needs work."
	if r := sendHook(t, env, gitlabfake.EventNote, "plain-note", plain); r != "ignored" {
		t.Errorf("a note without a command answered %q, want ignored", r)
	}
	mention := bytes.Replace(plain, []byte(`"This MR needs work."`), []byte(`"@`+demo.Robot+` status"`), 1)
	if r := sendHook(t, env, gitlabfake.EventNote, "mention-note", mention); r != "accepted" {
		t.Errorf("a note mentioning the robot with a command answered %q, want accepted", r)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// shortDeadlines parks a waiting change quickly.
func shortDeadlines() flows.PollConfig {
	p := demo.Poll
	p.PipelineDeadline = 1500 * time.Millisecond
	return p
}

// TestUnknownCommandNoChangeAndRateLimit: an unknown command gets one reply
// listing the valid ones; a command on an MR without a change gets one reply
// and changes nothing; a user over the rate limit is answered once.
func TestUnknownCommandNoChangeAndRateLimit(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	env.GitLab.SetPipelineScript(env.Project.ID, gitlabfake.PipelineScript{MR: []string{"failed"}})
	app, sc := startBot(t, env)
	_, iid := runUntil(t, env, "CREATE_PIPELINE_FAILED")

	env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Developer, "/frobnicate\n/retyr")
	r := waitReplies(t, env, iid, 1)
	if !strings.Contains(r[0].Body, "frobnicate") || !strings.Contains(r[0].Body, "/retry") {
		t.Fatalf("unknown-command reply should name it and list valid commands: %q", r[0].Body)
	}

	// An MR nobody submitted through changebot.
	callAPI := func(method, path, body string) {
		req, _ := http.NewRequest(method, env.GitLab.URL()+"/api/v4/projects/"+itoa(env.Project.ID)+path, strings.NewReader(body))
		req.Header.Set("PRIVATE-TOKEN", "demo-dave-token")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %v %v", method, path, err, resp.Status)
		}
		resp.Body.Close()
	}
	callAPI(http.MethodPost, "/repository/branches", `{"branch":"feature","ref":"main"}`)
	callAPI(http.MethodPost, "/repository/commits", `{"branch":"feature","commit_message":"x","actions":[{"action":"create","file_path":"x.txt","content":"x"}]}`)
	callAPI(http.MethodPost, "/merge_requests", `{"source_branch":"feature","target_branch":"main","title":"by hand"}`)
	other := iid + 1
	// Bare slash words there are for another bot (or nobody): no reply
	// (issue 21.10). Their deliveries are processed (ignored) before the
	// absence of a reply is asserted.
	env.GitLab.AddNoteAsUser(env.Project.ID, other, demo.Developer, "/lgtm")
	env.GitLab.AddNoteAsUser(env.Project.ID, other, demo.Developer, "/retry")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var ignored int
		if err := sc.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_deliveries
			WHERE event = 'Note Hook' AND outcome = 'ignored'`).Scan(&ignored); err != nil {
			t.Fatal(err)
		}
		if ignored >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d note deliveries ignored, want 2", ignored)
		}
	}
	if r := botReplies(env, other); len(r) != 0 {
		t.Fatalf("bare slash words on a merge request changebot did not open were answered: %q", r[0].Body)
	}
	env.GitLab.AddNoteAsUser(env.Project.ID, other, demo.Developer, "@changebot retry")
	r2 := waitReplies(t, env, other, 1)
	if !strings.Contains(r2[0].Body, "carries no changebot change") {
		t.Fatalf("no-change reply: %q", r2[0].Body)
	}

	// Rate limit: the default is 20 commands a minute; the excess is
	// answered once.
	var burst []gitlabfake.Note
	for i := range 25 {
		burst = append(burst, env.GitLab.AddNoteAsUser(env.Project.ID, other, demo.Reporter, "@changebot status "+itoa(int64(i))))
	}
	// All 25 are processed, some over the limit, before the replies are
	// counted.
	rateLimited := 0
	for _, o := range waitNotesHandled(t, env, app, burst...) {
		if o == commands.OutcomeRateLimited {
			rateLimited++
		}
	}
	if rateLimited < 5 {
		t.Fatalf("%d of 25 notes rate limited, want at least the 5 over the limit of 20", rateLimited)
	}
	limited := 0
	for _, n := range botReplies(env, other) {
		if strings.Contains(n.Body, "changebot ignores your commands until") {
			limited++
		}
	}
	if limited != 1 {
		t.Fatalf("rate-limit replies = %d, want exactly 1", limited)
	}
}

// TestRetryNeedsTheProtectedBranchMergeLevel: on a project whose protected
// target branch lets only Maintainers merge, a Developer's /retry is refused
// with that reason.
func TestRetryNeedsTheProtectedBranchMergeLevel(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	members := map[string]int{demo.Robot: gitlabfake.AccessMaintainer, demo.Developer: gitlabfake.AccessDeveloper,
		demo.Requester: gitlabfake.AccessDeveloper}
	for _, r := range demo.Reviewers {
		members[r.Name] = gitlabfake.AccessDeveloper
	}
	strict := env.GitLab.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "platform/strict", Members: members,
		MergeAccessLevel: gitlabfake.AccessMaintainer})
	env.GitLab.SetPipelineScript(strict.ID, gitlabfake.PipelineScript{MR: []string{"failed"}})
	app, _ := startBot(t, env)
	body := `{"subject_id":"s","target_key":"prod","project":"platform/strict","title":"t","requested_by":"alice","files":[{"path":"a.yaml","content":"a: 1\n"}]}`
	req, _ := http.NewRequest(http.MethodPost, env.BaseURL+"/api/v1/changes", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+demo.APIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %v", err)
	}
	var out struct {
		OperationID string `json:"operation_id"`
	}
	_ = jsonDecode(resp, &out)
	resp.Body.Close()
	waitStep(t, env, out.OperationID, "CREATE_PIPELINE_FAILED", 60*time.Second)
	env.GitLab.AddNoteAsUser(strict.ID, 1, demo.Developer, "/retry")
	deadline := time.Now().Add(15 * time.Second)
	for {
		evs := eventsOf(t, app, out.OperationID)
		last := evs[len(evs)-1]
		if last.Type == store.EventRefused {
			if !strings.Contains(string(last.Payload), "Maintainer") {
				t.Fatalf("refusal does not name the merge level: %s", last.Payload)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Developer's /retry was not refused")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v, _ := demo.GetChange(context.Background(), env, out.OperationID); v.Step.Name != "CREATE_PIPELINE_FAILED" {
		t.Fatalf("refused /retry moved the change to %s", v.Step.Name)
	}
}
