package bot

import (
	"context"
	"strings"
	"testing"
	"time"

	"changebot/demo"
	"changebot/flows/rules"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
)

// TestPersonClosesMRStatusAnswers is issue 10 point 1 end to end: while the
// change waits for its running MR pipeline, a developer closes the MR in
// GitLab; the change ends in MR_CLOSED with the developer as its actor, and
// the developer's /status answers the closed state, naming who closed it.
func TestPersonClosesMRStatusAnswers(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	env.GitLab.SetPipelineScript(env.Project.ID, gitlabfake.PipelineScript{MR: []string{"running"}})
	app, _ := startBotWithPoll(t, env, shortDeadlines())
	opID, iid := runUntil(t, env, "CREATE_MR_OPENED")

	dev, err := gitlab.New(gitlab.Config{BaseURL: env.GitLab.URL(), Token: "demo-dave-token", RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.CloseMergeRequest(context.Background(), env.Project.ID, iid); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, app, opID, func(ev store.Event) bool {
		return rules.StepCode(ev.ToStep) == rules.ClosedByPerson && ev.Actor == demo.Developer
	})

	env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Developer, "/status")
	want := []string{"MR_CLOSED", demo.Developer + " closed merge request"}
	deadline := time.Now().Add(10 * time.Second)
	var body string
	for time.Now().Before(deadline) {
		snap, _ := env.GitLab.MergeRequest(env.Project.ID, iid)
		for _, n := range snap.Notes {
			if strings.HasPrefix(n.Body, "<!-- changebot:status") {
				body = n.Body
			}
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(body, w)
		}
		if ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("status comment after /status does not show %q:\n%s", want, body)
}
