package gitlabfake

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func message(t *testing.T, b []byte) string {
	t.Helper()
	var m struct {
		Message json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decoding error body %s: %v", b, err)
	}
	var s string
	if json.Unmarshal(m.Message, &s) == nil {
		return s
	}
	return string(m.Message)
}

func TestApprove(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		spec    ProjectSpec
		prepare func(e *env, mr map[string]any)
		token   string
		body    func(mr map[string]any) any
		status  int
		msg     string
	}{
		{name: "first approval", token: reviewerToken, status: 201},
		{name: "with the head sha", token: reviewerToken, status: 201,
			body: func(mr map[string]any) any { return map[string]any{"sha": mr["sha"]} }},
		{name: "same user twice", token: reviewerToken, status: 401, msg: "401 Unauthorized",
			prepare: func(e *env, mr map[string]any) { e.must(201, "POST", mrPath(e, mr, "/approve"), reviewerToken, nil) }},
		{name: "old sha", token: reviewerToken, status: 409, msg: "SHA does not match HEAD of source branch: 0123456789abcdef0123456789abcdef01234567",
			body: func(map[string]any) any { return map[string]any{"sha": "0123456789abcdef0123456789abcdef01234567"} }},
		{name: "reporter may not approve", token: reporterToken, status: 403, msg: "403 Forbidden"},
		{name: "unknown token", token: "nope", status: 401, msg: "401 Unauthorized"},
		{name: "closed MR", token: reviewerToken, status: 401, msg: "401 Unauthorized",
			prepare: func(e *env, mr map[string]any) {
				e.must(200, "PUT", mrPath(e, mr, ""), robotToken, map[string]any{"state_event": "close"})
			}},
		{name: "checklist missing", token: reviewerToken, status: 422, msg: "checklist mismatch",
			prepare: func(e *env, _ map[string]any) {
				e.srv.SetApprovalChecklist(e.proj.ID, []ChecklistItem{{ID: "tested", Text: "I tested it"}})
			}},
		{name: "checklist confirmed", token: reviewerToken, status: 201,
			prepare: func(e *env, _ map[string]any) {
				e.srv.SetApprovalChecklist(e.proj.ID, []ChecklistItem{{ID: "tested", Text: "I tested it"}})
			},
			body: func(map[string]any) any {
				return map[string]any{"checklist": []any{map[string]any{"id": "tested", "confirmed": true}}}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, tt.spec)
			mr := e.openMR("feature")
			if tt.prepare != nil {
				tt.prepare(e, mr)
			}
			var body any
			if tt.body != nil {
				body = tt.body(mr)
			}
			st, _, b := e.call("POST", mrPath(e, mr, "/approve"), tt.token, body)
			if st != tt.status {
				t.Fatalf("status %d, want %d: %s", st, tt.status, b)
			}
			if tt.msg != "" && message(t, b) != tt.msg {
				t.Errorf("message %q, want %q", message(t, b), tt.msg)
			}
			snap, _ := e.srv.MergeRequest(e.proj.ID, 1)
			wantApprovals := 0
			if tt.status == 201 || tt.name == "same user twice" {
				wantApprovals = 1
			}
			if len(snap.Approvals) != wantApprovals {
				t.Errorf("approvals %v, want %d", snap.Approvals, wantApprovals)
			}
		})
	}
}

func TestChecklistMismatchCarriesItems(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	items := []ChecklistItem{{ID: "a", Text: "A"}, {ID: "b", Text: "B"}}
	e.srv.SetApprovalChecklist(e.proj.ID, items)
	mr := e.openMR("feature")
	got := e.must(200, "GET", e.projPath("/approval_checklist"), robotToken, nil)
	if n := len(got["items"].([]any)); n != 2 {
		t.Fatalf("checklist has %d items, want 2", n)
	}
	body := map[string]any{"checklist": []any{map[string]any{"id": "a", "confirmed": true}}}
	m := e.must(422, "POST", mrPath(e, mr, "/approve"), reviewerToken, body)
	if n := len(m["items"].([]any)); n != 2 {
		t.Errorf("422 carries %d items, want 2: %v", n, m)
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		spec       ProjectSpec
		script     PipelineScript
		prepare    func(e *env, mr map[string]any)
		token      string
		sha        string // "head" for the MR head
		status     int
		msg        string
		wantDetail string // detailed_merge_status before the merge call
	}{
		{name: "mergeable", token: robotToken, sha: "head", status: 200, wantDetail: "mergeable"},
		{name: "without sha", token: robotToken, status: 200, wantDetail: "mergeable"},
		{name: "old sha", token: robotToken, sha: "0123456789abcdef0123456789abcdef01234567", status: 409, wantDetail: "mergeable"},
		{name: "reporter", token: reporterToken, sha: "head", status: 401, msg: "401 Unauthorized", wantDetail: "mergeable"},
		{name: "pipeline running", script: PipelineScript{MR: []string{"running"}}, token: robotToken, sha: "head",
			status: 405, msg: "405 Method Not Allowed", wantDetail: "ci_still_running"},
		{name: "pipeline failed", script: PipelineScript{MR: []string{"failed"}}, token: robotToken, sha: "head",
			status: 405, wantDetail: "ci_must_pass"},
		{name: "pipeline canceled", script: PipelineScript{MR: []string{"canceled"}}, token: robotToken, sha: "head",
			status: 405, wantDetail: "ci_must_pass"},
		{name: "not approved", spec: ProjectSpec{ApprovalsRequired: 1}, token: robotToken, sha: "head",
			status: 405, wantDetail: "not_approved"},
		{name: "approved", spec: ProjectSpec{ApprovalsRequired: 1}, token: robotToken, sha: "head", status: 200,
			wantDetail: "mergeable",
			prepare:    func(e *env, _ map[string]any) { e.srv.ApproveAsUser(e.proj.ID, 1, "human") }},
		{name: "ff needs rebase", spec: ProjectSpec{MergeMethod: "ff"}, token: robotToken, sha: "head",
			status: 405, wantDetail: "need_rebase",
			prepare: func(e *env, _ map[string]any) { e.srv.PushToTarget(e.proj.ID, "main") }},
		{name: "rebase_merge needs rebase", spec: ProjectSpec{MergeMethod: "rebase_merge"}, token: robotToken, sha: "head",
			status: 405, wantDetail: "need_rebase",
			prepare: func(e *env, _ map[string]any) { e.srv.PushToTarget(e.proj.ID, "main") }},
		{name: "merge method ignores a moved target", token: robotToken, sha: "head", status: 200, wantDetail: "mergeable",
			prepare: func(e *env, _ map[string]any) { e.srv.PushToTarget(e.proj.ID, "main") }},
		{name: "closed", token: robotToken, sha: "head", status: 405, wantDetail: "not_open",
			prepare: func(e *env, mr map[string]any) {
				e.must(200, "PUT", mrPath(e, mr, ""), robotToken, map[string]any{"state_event": "close"})
			}},
		{name: "already merged", token: robotToken, sha: "head", status: 405, wantDetail: "not_open",
			prepare: func(e *env, mr map[string]any) { e.must(200, "PUT", mrPath(e, mr, "/merge"), robotToken, nil) }},
		{name: "maintainer-only merging", spec: ProjectSpec{MergeAccessLevel: AccessMaintainer}, token: reviewerToken,
			sha: "head", status: 401, wantDetail: "mergeable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, tt.spec)
			e.srv.SetPipelineScript(e.proj.ID, tt.script)
			mr := e.openMR("feature")
			e.idle()
			if tt.prepare != nil {
				tt.prepare(e, mr)
				e.idle()
			}
			got := e.must(200, "GET", mrPath(e, mr, ""), robotToken, nil)
			if got["detailed_merge_status"] != tt.wantDetail {
				t.Fatalf("detailed_merge_status %v, want %s", got["detailed_merge_status"], tt.wantDetail)
			}
			body := map[string]any{}
			if tt.sha == "head" {
				body["sha"] = got["sha"]
			} else if tt.sha != "" {
				body["sha"] = tt.sha
			}
			st, _, b := e.call("PUT", mrPath(e, mr, "/merge"), tt.token, body)
			if st != tt.status {
				t.Fatalf("status %d, want %d: %s", st, tt.status, b)
			}
			if tt.msg != "" && message(t, b) != tt.msg {
				t.Errorf("message %q, want %q", message(t, b), tt.msg)
			}
			if st == 409 && message(t, b) != "SHA does not match HEAD of source branch: "+got["sha"].(string) {
				t.Errorf("409 message %q does not name the head %v", message(t, b), got["sha"])
			}
			if st == 200 {
				var m map[string]any
				_ = json.Unmarshal(b, &m)
				if m["state"] != "merged" || m["merge_commit_sha"] == nil {
					t.Errorf("after merge: state %v, merge_commit_sha %v", m["state"], m["merge_commit_sha"])
				}
			}
		})
	}
}

func TestMergeFastForwardAndSquash(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		spec              ProjectSpec
		squash            bool
		wantMergeCommit   bool
		wantSquashCommit  bool
		wantTargetIsHead  bool
		wantSourceRemoved bool
	}{
		{name: "merge commit", wantMergeCommit: true},
		{name: "merge commit with squash", squash: true, wantMergeCommit: true, wantSquashCommit: true},
		{name: "fast-forward", spec: ProjectSpec{MergeMethod: "ff"}, wantTargetIsHead: true},
		{name: "squash always", spec: ProjectSpec{SquashOption: "always"}, wantMergeCommit: true, wantSquashCommit: true},
		{name: "squash never", spec: ProjectSpec{SquashOption: "never"}, squash: true, wantMergeCommit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, tt.spec)
			mr := e.openMR("feature")
			e.idle()
			m := e.must(200, "PUT", mrPath(e, mr, "/merge"), robotToken, map[string]any{
				"squash": tt.squash, "should_remove_source_branch": true,
			})
			if (m["merge_commit_sha"] != nil) != tt.wantMergeCommit || (m["squash_commit_sha"] != nil) != tt.wantSquashCommit {
				t.Errorf("merge_commit_sha %v, squash_commit_sha %v", m["merge_commit_sha"], m["squash_commit_sha"])
			}
			main := e.must(200, "GET", e.projPath("/repository/branches/main"), robotToken, nil)
			head := main["commit"].(map[string]any)["id"]
			if tt.wantTargetIsHead && head != m["sha"] {
				t.Errorf("ff: main at %v, want MR head %v", head, m["sha"])
			}
			if tt.wantMergeCommit && head != m["merge_commit_sha"] {
				t.Errorf("main at %v, want merge commit %v", head, m["merge_commit_sha"])
			}
			raw := e.srv.URL() + "/api/v4" + e.projPath("/repository/files/feature.yaml/raw?ref=main")
			req, _ := http.NewRequest("GET", raw, nil)
			req.Header.Set("PRIVATE-TOKEN", robotToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("file not on main after merge: %v %v", err, resp)
			}
			resp.Body.Close()
			e.must(404, "GET", e.projPath("/repository/branches/feature"), robotToken, nil)
		})
	}
}

func TestCreateMR(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	mr := e.openMR("feature")
	if mr["iid"].(float64) != 1 || mr["id"].(float64) == 1 || mr["state"] != "opened" {
		t.Errorf("first MR: id %v iid %v state %v", mr["id"], mr["iid"], mr["state"])
	}
	st, _, b := e.call("POST", e.projPath("/merge_requests"), robotToken, map[string]any{
		"source_branch": "feature", "target_branch": "main", "title": "again",
	})
	if st != 409 || message(t, b) != `["Another open merge request already exists for this source branch: !1"]` {
		t.Errorf("second MR: %d %s", st, b)
	}
	e.must(422, "POST", e.projPath("/merge_requests"), robotToken, map[string]any{
		"source_branch": "nope", "target_branch": "main", "title": "x",
	})
	e.must(400, "POST", e.projPath("/merge_requests"), robotToken, map[string]any{"source_branch": "feature"})
	e.must(403, "POST", e.projPath("/merge_requests"), reporterToken, map[string]any{
		"source_branch": "feature", "target_branch": "main", "title": "x",
	})

	st, _, b = e.call("GET", "/projects/group%2Frepo/merge_requests?source_branch=feature&state=opened", robotToken, nil)
	var list []map[string]any
	if st != 200 || json.Unmarshal(b, &list) != nil || len(list) != 1 {
		t.Fatalf("list by source branch: %d %s", st, b)
	}
	e.idle()
	got := e.must(200, "GET", mrPath(e, mr, "?include_rebase_in_progress=true"), robotToken, nil)
	hp, _ := got["head_pipeline"].(map[string]any)
	if hp == nil || hp["sha"] != got["sha"] || hp["status"] != "success" || hp["ref"] != "refs/merge-requests/1/head" {
		t.Errorf("head_pipeline %v for sha %v", hp, got["sha"])
	}
	if got["rebase_in_progress"] != false {
		t.Errorf("rebase_in_progress %v, want false", got["rebase_in_progress"])
	}
}

func TestCommits(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	commit := func(action, path string) (int, string) {
		st, _, b := e.call("POST", e.projPath("/repository/commits"), robotToken, map[string]any{
			"branch": "main", "commit_message": "m",
			"actions": []any{map[string]any{"action": action, "file_path": path, "content": "x"}},
		})
		if st == 201 {
			return st, ""
		}
		return st, message(t, b)
	}
	tests := []struct {
		name, action, path string
		status             int
		msg                string
	}{
		{"create existing", "create", "README.md", 400, "A file with this name already exists"},
		{"update missing", "update", "nope.txt", 400, "A file with this name doesn't exist"},
		{"delete missing", "delete", "nope.txt", 400, "A file with this name doesn't exist"},
		{"update existing", "update", "README.md", 201, ""},
	}
	for _, tt := range tests {
		if st, msg := commit(tt.action, tt.path); st != tt.status || msg != tt.msg {
			t.Errorf("%s: %d %q, want %d %q", tt.name, st, msg, tt.status, tt.msg)
		}
	}
	// A Developer may not push to the protected default branch.
	st, _, _ := e.call("POST", e.projPath("/repository/commits"), reviewerToken, map[string]any{
		"branch": "main", "commit_message": "m",
		"actions": []any{map[string]any{"action": "create", "file_path": "x", "content": "x"}},
	})
	if st != 403 {
		t.Errorf("developer push to main: %d, want 403", st)
	}
	e.must(400, "POST", e.projPath("/repository/branches"), robotToken, map[string]any{"branch": "main", "ref": "main"})
	e.must(404, "GET", e.projPath("/repository/branches/nope"), robotToken, nil)
}

func TestPushToMRBranchUpdatesMR(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{ResetApprovalsOnPush: true})
	mr := e.openMR("feature")
	e.idle()
	e.srv.ApproveAsUser(e.proj.ID, 1, "human")
	old := mr["sha"].(string)
	c := e.must(201, "POST", e.projPath("/repository/commits"), robotToken, map[string]any{
		"branch": "feature", "commit_message": "more",
		"actions": []any{map[string]any{"action": "update", "file_path": "feature.yaml", "content": "a: 2\n"}},
	})
	e.idle()
	snap, _ := e.srv.MergeRequest(e.proj.ID, 1)
	if snap.SHA != c["id"] || len(snap.Approvals) != 0 {
		t.Errorf("after push: sha %s (want %v), approvals %v (reset on push)", snap.SHA, c["id"], snap.Approvals)
	}
	updates := e.recv.find(EventMergeRequest, "update")
	if len(updates) != 1 || updates[0]["object_attributes"].(map[string]any)["oldrev"] != old {
		t.Fatalf("want one update hook with oldrev %s, got %v", old, updates)
	}
	st, _, b := e.call("GET", mrPath(e, mr, "/pipelines"), robotToken, nil)
	var list []map[string]any
	if st != 200 || json.Unmarshal(b, &list) != nil || len(list) != 2 || list[0]["sha"] != c["id"] {
		t.Errorf("MR pipelines, newest first: %s", b)
	}
}

func TestRebase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		behavior    RebaseBehavior
		wantDetail  string
		wantError   any
		wantNewHead bool
	}{
		{name: "success", wantDetail: "mergeable", wantError: nil, wantNewHead: true},
		{name: "conflict", behavior: RebaseBehavior{Conflict: true}, wantDetail: "conflict", wantError: "Rebase failed. Please rebase locally"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, ProjectSpec{MergeMethod: "ff"})
			mr := e.openMR("feature")
			e.idle()
			e.srv.PushToTarget(e.proj.ID, "main")
			e.srv.SetRebaseBehavior(e.proj.ID, 1, tt.behavior)
			e.idle()
			m := e.must(202, "PUT", mrPath(e, mr, "/rebase"), robotToken, nil)
			if m["rebase_in_progress"] != true {
				t.Errorf("202 body %v", m)
			}
			e.idle()
			got := e.must(200, "GET", mrPath(e, mr, "?include_rebase_in_progress=true"), robotToken, nil)
			if got["rebase_in_progress"] != false || got["merge_error"] != tt.wantError || got["detailed_merge_status"] != tt.wantDetail {
				t.Errorf("after rebase: in progress %v, merge_error %v, detailed %v", got["rebase_in_progress"], got["merge_error"], got["detailed_merge_status"])
			}
			if moved := got["sha"] != mr["sha"]; moved != tt.wantNewHead {
				t.Errorf("head moved %v, want %v", moved, tt.wantNewHead)
			}
			hooks := e.recv.find(EventMergeRequest, "update")
			if tt.wantNewHead && (len(hooks) != 1 || hooks[0]["object_attributes"].(map[string]any)["oldrev"] != mr["sha"]) {
				t.Errorf("want one update hook with oldrev, got %d", len(hooks))
			}
			if !tt.wantNewHead && len(hooks) != 0 {
				t.Errorf("failed rebase sent %d update hooks", len(hooks))
			}
		})
	}
}

func TestRebaseInProgress(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{MergeMethod: "ff"})
	mr := e.openMR("feature")
	e.srv.SetRebaseBehavior(e.proj.ID, 1, RebaseBehavior{StuckForever: true})
	e.must(202, "PUT", mrPath(e, mr, "/rebase"), robotToken, nil)
	st, _, b := e.call("PUT", mrPath(e, mr, "/rebase"), robotToken, nil)
	if st != 409 || !strings.HasPrefix(message(t, b), "Failed to enqueue the rebase operation") {
		t.Errorf("second rebase: %d %s", st, b)
	}
	got := e.must(200, "GET", mrPath(e, mr, "?include_rebase_in_progress=true"), robotToken, nil)
	if got["rebase_in_progress"] != true {
		t.Errorf("rebase_in_progress %v, want true", got["rebase_in_progress"])
	}
	if _, ok := e.must(200, "GET", mrPath(e, mr, ""), robotToken, nil)["rebase_in_progress"]; ok {
		t.Error("rebase_in_progress present without include_rebase_in_progress")
	}
	e.idle() // a stuck rebase does not count as pending work
	e.must(403, "PUT", mrPath(e, mr, "/rebase"), reporterToken, nil)
}

// TestMergeDuration: with SetMergeDuration the merge call is answered once
// the merge took effect; meanwhile the MR shows "locked" and a second merge
// call answers 405, as GitLab does while MergeService runs. A caller that
// stops waiting does not stop the merge.
func TestMergeDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		giveUp   bool // the first caller's client times out before the answer
		wantCode int  // status the first caller sees; 0: none (gave up)
	}{
		{name: "answered after the merge", wantCode: 200},
		{name: "the caller gave up", giveUp: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, ProjectSpec{})
			const d = 400 * time.Millisecond
			e.srv.SetMergeDuration(e.proj.ID, d)
			mr := e.openMR("feature")
			e.idle()
			client := &http.Client{}
			if tt.giveUp {
				client.Timeout = 50 * time.Millisecond
			}
			first := make(chan int, 1)
			start := time.Now()
			go func() {
				req, _ := http.NewRequest(http.MethodPut, e.srv.URL()+"/api/v4"+mrPath(e, mr, "/merge"),
					strings.NewReader(`{"sha":"`+mr["sha"].(string)+`"}`))
				req.Header.Set("PRIVATE-TOKEN", robotToken)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					first <- 0
					return
				}
				_ = resp.Body.Close()
				first <- resp.StatusCode
			}()
			for e.srv.CallCount(http.MethodPut, "/api/v4/projects/*/merge_requests/*/merge") == 0 {
				got := e.must(200, "GET", mrPath(e, mr, ""), robotToken, nil)
				if got["state"] == "locked" {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			got := e.must(200, "GET", mrPath(e, mr, ""), robotToken, nil)
			if got["state"] != "locked" || got["detailed_merge_status"] != "not_open" {
				t.Fatalf("during the merge: state %v, detailed_merge_status %v; want locked, not_open", got["state"], got["detailed_merge_status"])
			}
			if st, _, b := e.call("PUT", mrPath(e, mr, "/merge"), reviewerToken, map[string]any{"sha": mr["sha"]}); st != 405 || message(t, b) != "405 Method Not Allowed" {
				t.Fatalf("a second merge during the first: %d %s; want 405", st, b)
			}
			if code := <-first; code != tt.wantCode {
				t.Fatalf("first merge call: %d; want %d", code, tt.wantCode)
			}
			e.idle()
			if took := time.Since(start); took < d {
				t.Fatalf("the merge took effect after %s; want %s", took, d)
			}
			got = e.must(200, "GET", mrPath(e, mr, ""), robotToken, nil)
			if got["state"] != "merged" || got["merge_commit_sha"] == nil {
				t.Fatalf("after the merge: state %v, merge_commit_sha %v", got["state"], got["merge_commit_sha"])
			}
		})
	}
}
