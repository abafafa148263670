package bot

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"changebot/api"
	"changebot/demo"
	"changebot/platform/gitlab/gitlabfake"
)

// TestChecklistAdapterEndToEnd runs two changes with approval.adapter =
// checklist (issue 4 point 10) on a project whose approval checklist the
// platform changes right after the second change was submitted. The first
// change reads the checklist once and the adapter caches it; the second
// change's first approve still carries the cached list, GitLab answers 422
// with the list in force, the adapter rebuilds the call from that answer and
// retries once without reading the configuration again, and the change
// reaches VALIDATED.
func TestChecklistAdapterEndToEnd(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, true, 200*time.Millisecond)
	env.Config.Settings = map[string]string{"approval.adapter": "checklist"}
	env.GitLab.SetApprovalChecklist(env.Project.ID, []gitlabfake.ChecklistItem{{ID: "tested", Text: "I tested it"}})
	startBot(t, env)
	ctx := t.Context()

	run := func(subject string, afterSubmit func()) int64 {
		t.Helper()
		status, _, opID := submitTestChange(t, env, subject)
		if status != http.StatusAccepted {
			t.Fatalf("submitting %s: %d", subject, status)
		}
		if afterSubmit != nil {
			afterSubmit()
		}
		var steps []string
		view, err := demo.FollowChange(ctx, env, opID, 60*time.Second, func(v api.ChangeView) { steps = append(steps, v.Step.Name) })
		if err != nil {
			t.Fatalf("%s: %v (steps seen: %v)", subject, err, steps)
		}
		if view.MergeRequest == nil {
			t.Fatalf("%s: no merge request in %+v", subject, view)
		}
		snap, _ := env.GitLab.MergeRequest(env.Project.ID, view.MergeRequest.IID)
		if snap.State != "merged" || len(snap.Approvals) != 2 {
			t.Fatalf("%s: MR state %s approvals %v; want merged with both reviewers", subject, snap.State, snap.Approvals)
		}
		return view.MergeRequest.IID
	}
	const configReads = "/api/v4/projects/*/approval_checklist"

	first := run("checklist-first", nil)
	if n := env.GitLab.CallCount("GET", configReads); n != 1 {
		t.Fatalf("checklist reads after the first change = %d; want 1", n)
	}
	want := []checklistApprove{{201, "tested"}, {201, "tested"}}
	if got := checklistApproves(t, env, first); !slices.Equal(got, want) {
		t.Errorf("approve calls of the first change %v; want %v", got, want)
	}

	second := run("checklist-second", func() {
		env.GitLab.SetApprovalChecklist(env.Project.ID, []gitlabfake.ChecklistItem{
			{ID: "tested", Text: "I tested it"}, {ID: "rollback", Text: "I know how to roll back"}})
	})
	if n := env.GitLab.CallCount("GET", configReads); n != 1 {
		t.Errorf("checklist reads after the second change = %d; want 1 (the 422 carried the new list)", n)
	}
	want = []checklistApprove{{422, "tested"}, {201, "tested,rollback"}, {201, "tested,rollback"}}
	if got := checklistApproves(t, env, second); !slices.Equal(got, want) {
		t.Errorf("approve calls of the second change %v; want %v", got, want)
	}
}

// checklistApprove is one approve call as gitlabfake saw it: the answer and
// the confirmed checklist ids, comma-separated.
type checklistApprove struct {
	status    int
	confirmed string
}

func checklistApproves(t *testing.T, env *demo.Env, iid int64) []checklistApprove {
	t.Helper()
	var out []checklistApprove
	suffix := "/merge_requests/" + strconv.FormatInt(iid, 10) + "/approve"
	for _, c := range env.GitLab.Calls() {
		if c.Method != http.MethodPost || !strings.HasSuffix(c.Path, suffix) {
			continue
		}
		var body struct {
			Checklist []struct {
				ID        string `json:"id"`
				Confirmed bool   `json:"confirmed"`
			} `json:"checklist"`
		}
		if err := json.Unmarshal(c.Body, &body); err != nil {
			t.Fatalf("approve body %q: %v", c.Body, err)
		}
		var ids []string
		for _, it := range body.Checklist {
			if it.Confirmed {
				ids = append(ids, it.ID)
			}
		}
		out = append(out, checklistApprove{c.Status, strings.Join(ids, ",")})
	}
	return out
}
