package bot

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
)

// TestQueueFreezeAPIAndCommands (issue 22 point 5): on a project whose
// merge method queues every change (ff), an operator freezes main through
// the API; the demo change then waits in the queue (HANDLE_QUEUED), which
// GET /api/v1/queues shows with its path, head and freeze; the front
// refuses a change that is not waiting and takes the waiting one; a
// developer's /unfreeze is refused for the role, the operator's runs and
// is answered, and the change merges. Every exchange is validated against
// openapi.json (the package's round tripper).
func TestQueueFreezeAPIAndCommands(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 100*time.Millisecond)
	env.GitLab.SetMergeMethod(env.Project.ID, "ff")
	app, _ := startBot(t, env)
	queue := "/api/v1/queues/" + strconv.FormatInt(env.Project.ID, 10) + "/main"

	if code, _, body := apiCall(t, env, http.MethodPost, queue+"/freeze", demo.ViewerToken, `{"reason":"x"}`); code != http.StatusForbidden {
		t.Fatalf("freeze by a viewer: %d %s, want 403", code, body)
	}
	if code, _, body := apiCall(t, env, http.MethodPost, queue+"/freeze", demo.OperatorToken, `{}`); code != http.StatusBadRequest ||
		!strings.Contains(string(body), `"field":"reason"`) {
		t.Fatalf("freeze without a reason: %d %s, want 400 naming reason", code, body)
	}
	code, _, body := apiCall(t, env, http.MethodPost, queue+"/freeze", demo.OperatorToken, `{"reason":"main is red"}`)
	var q api.QueueView
	if code != http.StatusOK || json.Unmarshal(body, &q) != nil || q.Frozen == nil || q.Frozen.By != api.TokenID(demo.OperatorToken) ||
		q.Frozen.Reason != "main is red" {
		t.Fatalf("freeze: %d %s, want 200 frozen by the operator's token", code, body)
	}

	opID, iid := runUntil(t, env, "HANDLE_QUEUED")
	code, _, body = apiCall(t, env, http.MethodGet, "/api/v1/queues", demo.ViewerToken, nil)
	var list api.QueueListView
	if code != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Queues) != 1 {
		t.Fatalf("GET /api/v1/queues: %d %s, want the one queue", code, body)
	}
	if s := list.Queues[0]; s.Project != demo.Project || s.TargetBranch != "main" || s.Waiting != 1 || s.Head != nil || s.Frozen == nil {
		t.Errorf("listed %+v, want main of %s, frozen, one change waiting, no head", s, demo.Project)
	}
	if code, _, body := apiCall(t, env, http.MethodPost, "/api/v1/changes/op_01NOSUCHCHANGE000000000000/front", demo.OperatorToken, nil); code != http.StatusNotFound {
		t.Errorf("front of an unknown change: %d %s, want 404", code, body)
	}
	code, _, body = apiCall(t, env, http.MethodPost, "/api/v1/changes/"+opID+"/front", demo.OperatorToken, `{"reason":"hotfix"}`)
	if code != http.StatusOK || json.Unmarshal(body, &q) != nil || len(q.Waiting) != 1 || q.Waiting[0].OperationID != opID ||
		q.Waiting[0].MovedToFrontBy == nil || *q.Waiting[0].MovedToFrontBy != api.TokenID(demo.OperatorToken) || q.Waiting[0].MRIID != iid {
		t.Fatalf("front: %d %s, want the change first, moved by the operator's token", code, body)
	}

	dev := env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Developer, "/unfreeze")
	waitNotesHandled(t, env, app, dev)
	if r := waitReplies(t, env, iid, 1); !strings.Contains(r[0].Body, "`/unfreeze` was not run because of your role: it is for operators only.") {
		t.Fatalf("reply to the developer: %q", r[0].Body)
	}
	if code, _, body := apiCall(t, env, http.MethodGet, queue, demo.ViewerToken, nil); code != http.StatusOK || !strings.Contains(string(body), `"reason":"main is red"`) {
		t.Fatalf("after the refused /unfreeze: %d %s, want main still frozen", code, body)
	}
	env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Operator, "/unfreeze fixed")
	if r := waitReplies(t, env, iid, 2); !strings.Contains(r[1].Body, "The merge queue of `main` is unfrozen") {
		t.Fatalf("reply to the operator: %q", r[1].Body)
	}
	if _, err := demo.FollowChange(context.Background(), env, opID, 60*time.Second, func(api.ChangeView) {}); err != nil {
		t.Fatal(err)
	}
	code, _, body = apiCall(t, env, http.MethodPost, "/api/v1/changes/"+opID+"/front", demo.OperatorToken, nil)
	if code != http.StatusConflict || !strings.Contains(string(body), "is not waiting in a merge queue") {
		t.Errorf("front of a validated change: %d %s, want 409", code, body)
	}
	env.GitLab.AddNoteAsUser(env.Project.ID, iid, demo.Operator, "@"+demo.Robot+" freeze release")
	if r := waitReplies(t, env, iid, 3); !strings.Contains(r[2].Body, "The merge queue of `main` is frozen: release.") {
		t.Fatalf("reply to the operator's /freeze on a merged change: %q", r[2].Body)
	}
	if code, _, body := apiCall(t, env, http.MethodGet, queue, demo.ViewerToken, nil); code != http.StatusOK ||
		!strings.Contains(string(body), `"frozen":{"by":"`+demo.Operator+`","reason":"release"`) {
		t.Errorf("after /freeze: %d %s, want main frozen by %s", code, body, demo.Operator)
	}
}
