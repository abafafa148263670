package bot

import (
	"context"
	"strings"
	"testing"
	"time"

	"changebot/demo"
	"changebot/store"
)

// TestGitHubCheckWebhookEndsPipelineWait: on githubfake, the webhook of
// the pull request's last check (check_run, check_suite, workflow_run:
// each one check, decoded as a Partial pipeline hook) ends the change's
// wait for its checks; polling is not needed. The poll interval is ten
// minutes, so the first poll after the one at the wait's start would come
// long after the test's limit: the change leaves CREATE_MR_OPENED by a
// transition whose source is a stored webhook delivery, and then goes on to
// HANDLE_MERGED.
func TestGitHubCheckWebhookEndsPipelineWait(t *testing.T) {
	t.Parallel()
	// The checks run 2 s, so the poll at the wait's start finds them running.
	env := newGitHubTestEnv(t, true, 2*time.Second)
	poll := demo.Poll
	poll.ShortInterval, poll.LongInterval = 10*time.Minute, 10*time.Minute
	poll.PipelineDeadline, poll.DeployDeadline = time.Hour, time.Hour
	app, _ := startBotWithPoll(t, env, poll)
	opID, err := demo.SubmitChange(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	var ended store.Event
	deadline := time.Now().Add(patience * 30 * time.Second)
	for ended.Seq == 0 {
		if time.Now().After(deadline) {
			v, _ := demo.GetChange(context.Background(), env, opID)
			t.Fatalf("the wait for the checks never ended: at %s (%s)", v.Step.Name, v.Detail)
		}
		time.Sleep(50 * time.Millisecond)
		for _, ev := range eventsOf(t, app, opID) {
			if ev.Type == store.EventTransition && flowsStepName(ev.FromStep) == "CREATE_MR_OPENED" {
				ended = ev
			}
		}
	}
	if to := flowsStepName(ended.ToStep); to != "CREATE_SUCCEEDED" || !strings.HasPrefix(ended.Source, "webhook:") {
		t.Fatalf("the wait ended in %s from %q; want CREATE_SUCCEEDED from a webhook delivery", to, ended.Source)
	}
	waitEvent(t, app, opID, func(ev store.Event) bool { return flowsStepName(ev.ToStep) == "HANDLE_MERGED" })
}
