package gitlabfake

import (
	"testing"
	"time"
)

// TestFaultUserAndAfterEffect: a fault limited to one user leaves the others
// alone; an after-effect fault lets the write happen and loses its answer.
func TestFaultUserAndAfterEffect(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{})
	mr := e.openMR("feature")
	e.idle()
	const approve = "/api/v4/projects/*/merge_requests/*/approve"
	e.srv.InjectFault(Fault{PathPattern: approve, Status: 503, User: "reviewer", AfterEffect: true})
	e.must(201, "POST", mrPath(e, mr, "/approve"), robotToken, nil) // not the fault's user
	if st, _, _ := e.call("POST", mrPath(e, mr, "/approve"), reviewerToken, nil); st != 503 {
		t.Fatalf("status %d, want the fault's 503", st)
	}
	snap, _ := e.srv.MergeRequest(e.proj.ID, int64(mr["iid"].(float64)))
	if len(snap.Approvals) != 2 {
		t.Fatalf("approvals %v: the after-effect call did not take effect", snap.Approvals)
	}
	calls := e.srv.Calls()
	if last := calls[len(calls)-1]; last.Status != 503 || last.User != "reviewer" || last.At.IsZero() {
		t.Errorf("recorded %+v", last)
	}
}

// TestMergeBlock: a scripted detailed_merge_status and draft flag answer
// 405; a project rule leaves the MR open with merge_error, answered 422 or
// 200 as scripted; the zero value clears everything.
func TestMergeBlock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		block      MergeBlock
		wantStatus int
		wantDMS    string
		wantError  string
	}{
		{name: "checking", block: MergeBlock{DetailedMergeStatus: "checking"}, wantStatus: 405, wantDMS: "checking"},
		{name: "draft", block: MergeBlock{Draft: true}, wantStatus: 405, wantDMS: "draft_status"},
		{name: "rule 422", block: MergeBlock{Rule: "Commit message must name a ticket"}, wantStatus: 422, wantDMS: "mergeable", wantError: "Commit message must name a ticket"},
		{name: "rule 200", block: MergeBlock{Rule: "Blocked by compliance", RuleStatus: 200}, wantStatus: 200, wantDMS: "mergeable", wantError: "Blocked by compliance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, ProjectSpec{})
			mr := e.openMR("feature")
			e.idle()
			iid := int64(mr["iid"].(float64))
			e.srv.SetMergeBlock(e.proj.ID, iid, tt.block)
			got := e.must(200, "GET", mrPath(e, mr, ""), robotToken, nil)
			if got["detailed_merge_status"] != tt.wantDMS || got["draft"] != tt.block.Draft {
				t.Fatalf("detailed_merge_status %v draft %v", got["detailed_merge_status"], got["draft"])
			}
			if st, _, b := e.call("PUT", mrPath(e, mr, "/merge"), robotToken, map[string]any{"sha": mr["sha"]}); st != tt.wantStatus {
				t.Fatalf("merge answered %d %s, want %d", st, b, tt.wantStatus)
			}
			snap, _ := e.srv.MergeRequest(e.proj.ID, iid)
			if snap.State != "opened" || snap.MergeError != tt.wantError {
				t.Fatalf("state %s merge_error %q", snap.State, snap.MergeError)
			}
			e.srv.SetMergeBlock(e.proj.ID, iid, MergeBlock{})
			e.must(200, "PUT", mrPath(e, mr, "/merge"), robotToken, map[string]any{"sha": mr["sha"]})
		})
	}
}

// TestFinishRebaseEndsAStuckRebase: a rebase scripted StuckForever runs
// until FinishRebase, which moves the source branch onto the target.
func TestFinishRebaseEndsAStuckRebase(t *testing.T) {
	t.Parallel()
	e := setup(t, ProjectSpec{MergeMethod: "ff"})
	mr := e.openMR("feature")
	iid := int64(mr["iid"].(float64))
	e.srv.PushToTarget(e.proj.ID, e.proj.DefaultBranch)
	e.srv.SetRebaseBehavior(e.proj.ID, iid, RebaseBehavior{StuckForever: true})
	e.must(202, "PUT", mrPath(e, mr, "/rebase"), robotToken, nil)
	time.Sleep(50 * time.Millisecond)
	if snap, _ := e.srv.MergeRequest(e.proj.ID, iid); !snap.RebaseInProgress {
		t.Fatal("rebase not running")
	}
	e.srv.FinishRebase(e.proj.ID, iid)
	snap, _ := e.srv.MergeRequest(e.proj.ID, iid)
	if snap.RebaseInProgress || snap.SHA == mr["sha"] || snap.DetailedMergeStatus == "need_rebase" {
		t.Fatalf("after FinishRebase: %+v", snap)
	}
}

// TestIsDraftTitle: the title prefixes that make an MR a draft (GitLab's
// "Draft merge requests"); removing them marks it ready.
func TestIsDraftTitle(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		title string
		want  bool
	}{
		{"Draft: config change", true},
		{"draft:config change", true},
		{"[Draft] config change", true},
		{"(Draft) config change", true},
		{"  Draft: leading spaces", true},
		{"config change", false},
		{"A draft of the config", false},
		{"Drafting: not a prefix", false},
	} {
		if got := isDraftTitle(tt.title); got != tt.want {
			t.Errorf("isDraftTitle(%q) = %v, want %v", tt.title, got, tt.want)
		}
	}
}
