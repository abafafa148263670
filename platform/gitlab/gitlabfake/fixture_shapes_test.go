package gitlabfake

import (
	"encoding/json"
	"strings"
	"testing"

	"changebot/internal/fixture"
)

// Exceptions shared by several payloads, each with its reason.
var (
	noLabelsAssignees = map[string]string{
		"labels[]":                   "the fake has no labels: arrays are empty",
		"object_attributes.labels[]": "the fake has no labels",
		"assignees[]":                "the fake has no assignees: arrays are empty",
		"reviewers[]":                "the fake has no reviewers: arrays are empty",
		"changes.labels":             "labels never change in the fake",
	}
	mrHookExceptions = fixture.Merge(noLabelsAssignees, map[string]string{
		"object_attributes.assignee_ids[]": "the fake has no assignees",
		"object_attributes.reviewer_ids[]": "the fake has no reviewers",
	})
)

// captured runs one scenario touching every payload kind and REST answer
// the fake produces and returns them by name.
func captured(t *testing.T) map[string][]byte {
	t.Helper()
	e := setup(t, ProjectSpec{ApprovalsRequired: 1})
	out := map[string][]byte{}
	rec := func(name string, want int, method, path, tok string, body any) {
		t.Helper()
		st, _, b := e.call(method, path, tok, body)
		if st != want {
			t.Fatalf("%s: %s %s answered %d, want %d: %s", name, method, path, st, want, b)
		}
		out[name] = b
	}
	e.must(201, "POST", e.projPath("/repository/branches"), robotToken, map[string]any{"branch": "feature", "ref": "main"})
	rec("commit", 201, "POST", e.projPath("/repository/commits"), robotToken, map[string]any{
		"branch": "feature", "commit_message": "Add file",
		"actions": []any{map[string]any{"action": "create", "file_path": "a.yaml", "content": "a: 1\n"}},
	})
	// From "feature", whose head has a parent (main's initial commit has none).
	rec("branch", 201, "POST", e.projPath("/repository/branches"), robotToken, map[string]any{"branch": "feature-copy", "ref": "feature"})
	mr := e.must(201, "POST", e.projPath("/merge_requests"), robotToken, map[string]any{
		"source_branch": "feature", "target_branch": "main", "title": "Change", "remove_source_branch": true,
	})
	e.idle()
	e.must(201, "POST", e.projPath("/repository/commits"), robotToken, map[string]any{
		"branch": "feature", "commit_message": "Update file",
		"actions": []any{map[string]any{"action": "update", "file_path": "a.yaml", "content": "a: 2\n"}},
	})
	e.must(200, "PUT", mrPath(e, mr, ""), robotToken, map[string]any{"title": "Change, edited", "description": "Edited."})
	e.idle()
	rec("approve", 201, "POST", mrPath(e, mr, "/approve"), reviewerToken, nil)
	rec("mr", 200, "GET", mrPath(e, mr, ""), robotToken, nil) // approved: mergeable, as in api-mr-get.json
	rec("approvals", 200, "GET", mrPath(e, mr, "/approvals"), robotToken, nil)
	rec("note", 201, "POST", mrPath(e, mr, "/notes"), robotToken, map[string]any{"body": "status"})
	var n map[string]any
	_ = json.Unmarshal(out["note"], &n)
	e.must(200, "PUT", mrPath(e, mr, "/notes/"+itoa(int64(n["id"].(float64)))), robotToken, map[string]any{"body": "status, edited"})
	rec("mr-pipelines", 200, "GET", mrPath(e, mr, "/pipelines"), robotToken, nil)
	rec("mr-pipeline-create", 201, "POST", mrPath(e, mr, "/pipelines"), robotToken, nil)
	rec("rebase", 202, "PUT", mrPath(e, mr, "/rebase"), robotToken, nil)
	e.idle()
	e.must(200, "PUT", mrPath(e, mr, "/merge"), robotToken, map[string]any{})
	other := e.openMR("other")
	e.must(200, "PUT", mrPath(e, other, ""), robotToken, map[string]any{"state_event": "close"})
	e.idle()

	hook := func(name, event, action string) {
		t.Helper()
		got := e.recv.find(event, action)
		if len(got) == 0 {
			t.Fatalf("%s: no %s with action/status %q delivered", name, event, action)
		}
		b, _ := json.Marshal(got[0])
		out[name] = b
	}
	hook("hook-mr-open", EventMergeRequest, "open")
	hook("hook-mr-approved", EventMergeRequest, "approved")
	hook("hook-mr-merge", EventMergeRequest, "merge")
	hook("hook-mr-close", EventMergeRequest, "close")
	hook("hook-note-create", EventNote, "create")
	hook("hook-note-update", EventNote, "update")
	for _, b := range e.recv.find(EventMergeRequest, "update") {
		oa := b["object_attributes"].(map[string]any)
		name := "hook-mr-update-edit"
		if _, ok := oa["oldrev"]; ok {
			name = "hook-mr-update-push"
		}
		out[name], _ = json.Marshal(b)
	}
	for _, b := range e.recv.find(EventPipeline, "success") {
		name := "hook-pipeline-push"
		if m, _ := b["merge_request"].(map[string]any); m != nil {
			if m["iid"] != float64(1) {
				continue // the other MR's, which may finish after its close
			}
			name = "hook-pipeline-mr"
		}
		out[name], _ = json.Marshal(b)
	}
	return out
}

func TestFixtureShapes(t *testing.T) {
	got := captured(t)
	pipelineExceptions := map[string]string{
		"source_pipeline":               "only multi-project and child pipelines have an upstream (source_pipeline)",
		"object_attributes.variables[]": "the fake's pipelines have no variables",
		"builds[].runner.tags[]":        "the fake runner has no tags",
		"builds[].environment":          "only deploy jobs have an environment: null for the MR pipeline's test job, set for push pipelines",
	}
	noteMR := map[string]string{
		"merge_request.labels[]": "the fake has no labels",
		"merge_request.assignee": "the fake has no assignees (assignee_id is null)",
	}
	mrREST := map[string]string{
		"assignee":               "the fake has no assignees: null",
		"assignees[]":            "the fake has no assignees: empty",
		"reviewers[]":            "the fake has no reviewers: empty",
		"labels[]":               "the fake has no labels: empty",
		"milestone":              "the fake has no milestones: null",
		"approvals_before_merge": "deprecated (16.0); the docs example's duplicate key holds an object, the fake sends null",
	}
	tests := []struct {
		name, fixture, got string
		exceptions         map[string]string
	}{
		{"MR hook open", "webhook-merge_request-open.json", "hook-mr-open", fixture.Merge(mrHookExceptions, map[string]string{
			"changes.state_id":      "client-go's open fixture is test data (state_id 4->3 is a merge); real opens (the gitlab.com fixture) report merge_status, prepared_at, updated_at",
			"changes.updated_by_id": "same test data; a real open has no updated_by_id change",
		})},
		{"MR hook open (gitlab.com)", "webhook-merge_request-open-gitlabcom.json", "hook-mr-open", mrHookExceptions},
		{"MR hook update after push", "webhook-merge_request-update-push.json", "hook-mr-update-push", mrHookExceptions},
		{"MR hook update after edit", "webhook-merge_request-update-edit.json", "hook-mr-update-edit", mrHookExceptions},
		{"MR hook approved (shape of unapproved)", "webhook-merge_request-unapproved.json", "hook-mr-approved", mrHookExceptions},
		{"MR hook merge", "webhook-merge_request-merge.json", "hook-mr-merge", mrHookExceptions},
		{"MR hook close", "webhook-merge_request-close.json", "hook-mr-close", mrHookExceptions},
		{"pipeline hook MR", "webhook-pipeline-mr-success.json", "hook-pipeline-mr", pipelineExceptions},
		{"pipeline hook push", "webhook-pipeline-mr-success.json", "hook-pipeline-push", map[string]string{
			"source_pipeline":               pipelineExceptions["source_pipeline"],
			"object_attributes.variables[]": pipelineExceptions["object_attributes.variables[]"],
			"builds[].runner.tags[]":        pipelineExceptions["builds[].runner.tags[]"],
			"merge_request":                 "only MR pipelines carry merge_request",
		}},
		{"note hook create", "webhook-note-mr.json", "hook-note-create", noteMR},
		{"note hook update", "webhook-note-mr.json", "hook-note-update", noteMR},
		{"GET MR", "api-mr-get.json", "mr", mrREST},
		{"GET MR (docs)", "api-mr-get-doc.json", "mr", mrREST},
		{"create branch", "api-branch-create.json", "branch", nil},
		{"create commit", "api-commit-create.json", "commit", nil},
		{"GET approvals", "api-mr-approvals-get.json", "approvals", nil},
		{"approve", "api-mr-approve.json", "approve", nil},
		{"create note", "api-mr-note-get.json", "note", nil},
		{"MR pipelines", "api-mr-pipelines-list.json", "mr-pipelines", nil},
		{"create MR pipeline", "api-mr-pipeline-create.json", "mr-pipeline-create", nil},
		{"rebase accepted", "api-mr-rebase-accepted.json", "rebase", nil},
	}
	// values are the paths, by test, whose type or enum value may differ
	// from the fixture's, each with its reason: the fixture records another
	// situation than the scenario's.
	notApprovedYet := "the scenario's project requires an approval, given after this; the fixture's MR needed none"
	noteMRStatus := map[string]string{
		"merge_request.merge_status":          "the fixture's MR was being rechecked after a conflict (cannot_be_merged, checking); the scenario's is mergeable",
		"merge_request.detailed_merge_status": "the same: checking in the fixture, mergeable here",
	}
	values := map[string]map[string]string{
		"MR hook open": {
			"object_attributes.merge_status":          "client-go's open fixture is test data (unchecked); the real gitlab.com open (the next case) says checking, as the fake does",
			"object_attributes.detailed_merge_status": "the same test data says mergeable at open; gitlab.com says checking",
		},
		"MR hook update after edit":              {"object_attributes.detailed_merge_status": notApprovedYet},
		"MR hook approved (shape of unapproved)": {"object_attributes.action": "the approved hook is checked against the unapproved capture, which has the same shape"},
		"pipeline hook MR":                       {"merge_request.detailed_merge_status": notApprovedYet},
		"note hook create":                       noteMRStatus,
		"note hook update": fixture.Merge(noteMRStatus, map[string]string{
			"object_attributes.action": "an edited note (GitLab 16.11+ sends action update); the fixture records a create of the same shape",
		}),
		"GET MR (docs)": {
			"detailed_merge_status": "the docs example says can_be_merged, a merge_status value; the gitlab.com capture api-mr-get.json has mergeable, as the fake",
			"head_pipeline.status":  "the docs example's pipelines failed; the scenario's passed",
			"pipeline.status":       "the same pipeline, as the MR's latest",
		},
		"GET approvals": {"merge_status": "the docs example's MR cannot be merged (conflicts); the scenario's can"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw := fixture.GitLab(t, tt.fixture)
			body, ok := got[tt.got]
			if !ok {
				t.Fatalf("scenario captured no %q", tt.got)
			}
			if diff := fixture.Diff(t, raw, body, fixture.Check{Exceptions: tt.exceptions, Values: values[tt.name]}); len(diff) > 0 {
				t.Errorf("%s differs from %s:\n  %s\npayload: %.300s…", tt.got, tt.fixture, strings.Join(diff, "\n  "), body)
			}
		})
	}
}
