package gitlab_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"changebot/platform"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
)

const (
	checklistReads = "/api/v4/projects/*/approval_checklist"
	approveCalls   = "/api/v4/projects/*/merge_requests/*/approve"
)

// approverFixture is the conformance fixture with a client whose adapter is
// whatever adapter holds when Approve is called.
type approverFixture struct {
	suite
	adapter atomic.Value // string
	c       *gitlab.Client
}

func setupApprover(t *testing.T, adapter string) *approverFixture {
	t.Helper()
	f := &approverFixture{suite: setup(t)}
	f.adapter.Store(adapter)
	c, err := gitlab.New(gitlab.Config{
		BaseURL:        f.srv.URL(),
		Token:          robotToken,
		ReviewerTokens: []string{reviewerTokenA, reviewerTokenB},
		RetryWaitMin:   time.Millisecond,
		RetryWaitMax:   10 * time.Millisecond,
		AdapterFunc: func(projectID int64) string {
			if projectID != f.project.ID {
				return gitlab.AdapterLegacy
			}
			return f.adapter.Load().(string)
		},
	})
	if err != nil {
		t.Fatalf("gitlab.New: %v", err)
	}
	f.c = c
	return f
}

// openMR opens a merge request from a new branch with one commit and
// returns its iid and head sha.
func (f *approverFixture) openMR(t *testing.T, branch string) (int64, string) {
	t.Helper()
	ctx, pid := t.Context(), f.project.ID
	if _, err := f.c.CreateBranch(ctx, pid, branch, "main"); err != nil {
		t.Fatalf("CreateBranch: %v", err)
	}
	commit, err := f.c.CreateCommit(ctx, pid, platform.CommitParams{Branch: branch, Message: "Apply " + branch,
		Actions: []platform.FileAction{{Action: "create", FilePath: "services/" + branch + ".yaml", Content: "replicas: 3\n"}}})
	if err != nil {
		t.Fatalf("CreateCommit: %v", err)
	}
	mr, err := f.c.CreateMergeRequest(ctx, pid, platform.CreateMRParams{SourceBranch: branch, TargetBranch: "main", Title: "Apply " + branch})
	if err != nil {
		t.Fatalf("CreateMergeRequest: %v", err)
	}
	return mr.IID, commit.SHA
}

// approveCall is one approve call the fake received.
type approveCall struct {
	status    int
	checklist []string // confirmed ids; nil when the body had no "checklist"
	hasSHA    bool
}

// approveCallsOf returns the approve calls on merge request !iid, in order.
func (f *approverFixture) approveCallsOf(t *testing.T, iid int64) []approveCall {
	t.Helper()
	var out []approveCall
	suffix := "/merge_requests/" + strconv.FormatInt(iid, 10) + "/approve"
	for _, c := range f.srv.Calls() {
		if c.Method != http.MethodPost || len(c.Path) < len(suffix) || c.Path[len(c.Path)-len(suffix):] != suffix {
			continue
		}
		var body struct {
			SHA       string `json:"sha"`
			Checklist *[]struct {
				ID        string `json:"id"`
				Confirmed bool   `json:"confirmed"`
			} `json:"checklist"`
		}
		if err := json.Unmarshal(c.Body, &body); err != nil {
			t.Fatalf("approve body %q: %v", c.Body, err)
		}
		ac := approveCall{status: c.Status, hasSHA: body.SHA != ""}
		if body.Checklist != nil {
			ac.checklist = []string{}
			for _, it := range *body.Checklist {
				if it.Confirmed {
					ac.checklist = append(ac.checklist, it.ID)
				}
			}
		}
		out = append(out, ac)
	}
	return out
}

// requireHTTPStatus fails unless err carries status both as a
// *platform.Error and as the client library's *gl.ErrorResponse.
func requireHTTPStatus(t *testing.T, err error, status int) {
	t.Helper()
	var pe *platform.Error
	if !errors.As(err, &pe) || pe.Status != status {
		t.Fatalf("err = %v; want a *platform.Error with status %d", err, status)
	}
	var er *gl.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil || er.Response.StatusCode != status {
		t.Fatalf("err = %v; want a *gl.ErrorResponse with status %d", err, status)
	}
	requireStatus(t, err, status, "")
}

func items(ids ...string) []gitlabfake.ChecklistItem {
	out := make([]gitlabfake.ChecklistItem, 0, len(ids))
	for _, id := range ids {
		out = append(out, gitlabfake.ChecklistItem{ID: id, Text: "I confirm " + id})
	}
	return out
}

func TestApproverLegacy(t *testing.T) {
	t.Parallel()
	f := setupApprover(t, gitlab.AdapterLegacy)
	ctx := t.Context()
	iid, sha := f.openMR(t, "legacy")
	if err := f.c.Approve(ctx, 0, f.project.ID, iid, sha); err != nil {
		t.Fatalf("Approve: %v", err)
	}
	err := f.c.Approve(ctx, 0, f.project.ID, iid, sha)
	requireHTTPStatus(t, err, 401)

	// The legacy call carries no checklist, so a project that requires one
	// refuses it with 422.
	f.srv.SetApprovalChecklist(f.project.ID, items("tested"))
	err = f.c.Approve(ctx, 1, f.project.ID, iid, sha)
	requireHTTPStatus(t, err, 422)

	calls := f.approveCallsOf(t, iid)
	if len(calls) != 3 {
		t.Fatalf("approve calls %+v; want 3", calls)
	}
	for _, c := range calls {
		if c.checklist != nil || !c.hasSHA {
			t.Errorf("legacy approve call %+v; want sha and no checklist", c)
		}
	}
	if n := f.srv.CallCount("GET", checklistReads); n != 0 {
		t.Errorf("legacy adapter read the checklist %d times", n)
	}
}

func TestChecklistApproverReadsConfigOnceAndCaches(t *testing.T) {
	t.Parallel()
	f := setupApprover(t, gitlab.AdapterChecklist)
	ctx := t.Context()
	f.srv.SetApprovalChecklist(f.project.ID, items("tested", "reviewed"))
	iid1, sha1 := f.openMR(t, "first")
	iid2, sha2 := f.openMR(t, "second")

	for _, r := range []int{0, 1} {
		if err := f.c.Approve(ctx, r, f.project.ID, iid1, sha1); err != nil {
			t.Fatalf("Approve !%d as %d: %v", iid1, r, err)
		}
	}
	if n := f.srv.CallCount("GET", checklistReads); n != 1 {
		t.Fatalf("checklist reads after the first MR = %d; want 1", n)
	}
	if err := f.c.Approve(ctx, 0, f.project.ID, iid2, sha2); err != nil {
		t.Fatalf("Approve !%d: %v", iid2, err)
	}
	if n := f.srv.CallCount("GET", checklistReads); n != 1 {
		t.Errorf("checklist reads after a second MR of the same project = %d; want 1 (cached)", n)
	}
	for _, iid := range []int64{iid1, iid2} {
		for _, c := range f.approveCallsOf(t, iid) {
			if c.status != 201 || !c.hasSHA || !slices.Equal(c.checklist, []string{"tested", "reviewed"}) {
				t.Errorf("approve call on !%d %+v; want 201 with sha and both items confirmed", iid, c)
			}
		}
	}
	snap, _ := f.srv.MergeRequest(f.project.ID, iid1)
	if len(snap.Approvals) != 2 {
		t.Errorf("approvals of !%d = %v; want both reviewers", iid1, snap.Approvals)
	}
}

func TestChecklistApproverRebuildsFrom422(t *testing.T) {
	t.Parallel()
	f := setupApprover(t, gitlab.AdapterChecklist)
	ctx := t.Context()
	f.srv.SetApprovalChecklist(f.project.ID, items("tested"))
	iid1, sha1 := f.openMR(t, "before")
	iid2, sha2 := f.openMR(t, "after")
	iid3, sha3 := f.openMR(t, "later")
	if err := f.c.Approve(ctx, 0, f.project.ID, iid1, sha1); err != nil {
		t.Fatalf("Approve !%d: %v", iid1, err)
	}

	// The platform changes the list while the cache holds the old one.
	f.srv.SetApprovalChecklist(f.project.ID, items("tested", "security"))
	if err := f.c.Approve(ctx, 0, f.project.ID, iid2, sha2); err != nil {
		t.Fatalf("Approve !%d after the list changed: %v", iid2, err)
	}
	calls := f.approveCallsOf(t, iid2)
	want := []approveCall{
		{status: 422, checklist: []string{"tested"}, hasSHA: true},
		{status: 201, checklist: []string{"tested", "security"}, hasSHA: true},
	}
	if len(calls) != 2 || calls[0].status != want[0].status || !slices.Equal(calls[0].checklist, want[0].checklist) ||
		calls[1].status != want[1].status || !slices.Equal(calls[1].checklist, want[1].checklist) || !calls[1].hasSHA {
		t.Fatalf("approve calls on !%d = %+v; want %+v", iid2, calls, want)
	}
	if n := f.srv.CallCount("GET", checklistReads); n != 1 {
		t.Errorf("checklist reads = %d; want 1 (the 422 body is the new list)", n)
	}

	// The cache took the list from the 422: the next MR needs one call.
	if err := f.c.Approve(ctx, 0, f.project.ID, iid3, sha3); err != nil {
		t.Fatalf("Approve !%d: %v", iid3, err)
	}
	if calls := f.approveCallsOf(t, iid3); len(calls) != 1 || calls[0].status != 201 {
		t.Errorf("approve calls on !%d = %+v; want one 201", iid3, calls)
	}
	if n := f.srv.CallCount("GET", checklistReads); n != 1 {
		t.Errorf("checklist reads = %d; want still 1", n)
	}
}

func TestChecklistApproverRetriesOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		body      string
		wantCalls int
	}{
		{"second 422 with items", `{"message":"checklist mismatch","items":[{"id":"moving","text":"Moving"}]}`, 2},
		{"422 without items", `{"message":"Approval rule violated"}`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupApprover(t, gitlab.AdapterChecklist)
			ctx := t.Context()
			iid, sha := f.openMR(t, "moving")
			f.srv.InjectFault(gitlabfake.Fault{Method: "POST", PathPattern: approveCalls, Status: 422, Body: tt.body})
			err := f.c.Approve(ctx, 0, f.project.ID, iid, sha)
			requireHTTPStatus(t, err, 422)
			if platform.IsTransient(err) {
				t.Errorf("422 counted as transient")
			}
			if n := f.srv.CallCount("POST", approveCalls); n != tt.wantCalls {
				t.Errorf("approve calls = %d; want %d", n, tt.wantCalls)
			}
			if n := f.srv.CallCount("GET", checklistReads); n != 1 {
				t.Errorf("checklist reads = %d; want 1", n)
			}
		})
	}
}

func TestChecklistApproverErrors(t *testing.T) {
	t.Parallel()
	f := setupApprover(t, gitlab.AdapterChecklist)
	ctx := t.Context()
	f.srv.SetApprovalChecklist(f.project.ID, items("tested"))
	iid, sha := f.openMR(t, "twice")

	// An unreadable checklist is the read's error; no approve is sent.
	f.srv.InjectFault(gitlabfake.Fault{Method: "GET", PathPattern: checklistReads, Status: 403, Times: 1})
	err := f.c.Approve(ctx, 0, f.project.ID, iid, sha)
	requireHTTPStatus(t, err, 403)
	if n := f.srv.CallCount("POST", approveCalls); n != 0 {
		t.Errorf("%d approve calls without a checklist", n)
	}

	// A moved head is 409, a double approve 401, as with the legacy call.
	err = f.c.Approve(ctx, 0, f.project.ID, iid, "0123456789abcdef0123456789abcdef01234567")
	requireHTTPStatus(t, err, 409)
	if err := f.c.Approve(ctx, 0, f.project.ID, iid, sha); err != nil {
		t.Fatalf("Approve: %v", err)
	}
	err = f.c.Approve(ctx, 0, f.project.ID, iid, sha)
	requireHTTPStatus(t, err, 401)
	if platform.IsTransient(err) {
		t.Errorf("401 on double approve counted as transient")
	}

	// 5xx stays transient.
	f.srv.InjectFault(gitlabfake.Fault{Method: "POST", PathPattern: approveCalls, Status: 502, Times: 1})
	err = f.c.Approve(ctx, 1, f.project.ID, iid, sha)
	requireHTTPStatus(t, err, 502)
	if !platform.IsTransient(err) {
		t.Errorf("502 not transient")
	}

	// Bad arguments send nothing.
	before := len(f.srv.Calls())
	if err := f.c.Approve(ctx, 2, f.project.ID, iid, sha); err == nil {
		t.Errorf("Approve as reviewer 2 of 2 succeeded")
	}
	if err := f.c.Approve(ctx, 0, f.project.ID, iid, ""); err == nil {
		t.Errorf("Approve without sha succeeded")
	}
	if n := len(f.srv.Calls()) - before; n != 0 {
		t.Errorf("%d calls for invalid arguments", n)
	}
}

func TestApproverSwitchesPerCall(t *testing.T) {
	t.Parallel()
	f := setupApprover(t, gitlab.AdapterLegacy)
	ctx := t.Context()
	f.srv.SetApprovalChecklist(f.project.ID, items("tested"))
	iid, sha := f.openMR(t, "switch")

	err := f.c.Approve(ctx, 0, f.project.ID, iid, sha)
	requireHTTPStatus(t, err, 422) // legacy: no checklist in the call

	f.adapter.Store(gitlab.AdapterChecklist)
	if err := f.c.Approve(ctx, 0, f.project.ID, iid, sha); err != nil {
		t.Fatalf("Approve with the checklist adapter: %v", err)
	}

	f.adapter.Store(gitlab.AdapterLegacy)
	err = f.c.Approve(ctx, 1, f.project.ID, iid, sha)
	requireHTTPStatus(t, err, 422)

	calls := f.approveCallsOf(t, iid)
	if len(calls) != 3 || calls[0].checklist != nil || !slices.Equal(calls[1].checklist, []string{"tested"}) || calls[2].checklist != nil {
		t.Fatalf("approve calls = %+v; want legacy, checklist, legacy", calls)
	}
	if n := f.srv.CallCount("GET", checklistReads); n != 1 {
		t.Errorf("checklist reads = %d; want 1 (checklist adapter only)", n)
	}

	// The choice is per project: another project stays on legacy.
	other := f.srv.AddProject(gitlabfake.ProjectSpec{PathWithNamespace: "group/other"})
	f.adapter.Store(gitlab.AdapterChecklist)
	if f.c.ApproverFor(other.ID) == f.c.ApproverFor(f.project.ID) {
		t.Errorf("ApproverFor(other project) is the checklist adapter; want legacy")
	}
}
