package github

import (
	"testing"

	"changebot/platform"
)

// TestSynthesize builds one pipeline from a sha's checks and the required
// contexts (docs/github.md "Checks and statuses make one pipeline").
func TestSynthesize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		checks   []check
		required []string
		want     string // "" means no pipeline
		wantID   int64
	}{
		{name: "no checks, nothing required", want: ""},
		{name: "required context not reported yet", required: []string{"build"}, want: "pending"},
		{name: "all passed", checks: []check{{1, "build", "success"}, {5, "ci/ext", "success"}}, want: "success", wantID: 5},
		{name: "a required one missing", checks: []check{{3, "build", "success"}}, required: []string{"build", "ci/ext"}, want: "running", wantID: 3},
		{name: "one failed, one running", checks: []check{{3, "build", "failed"}, {4, "lint", "running"}}, want: "failed", wantID: 4},
		{name: "canceled", checks: []check{{3, "build", "canceled"}, {4, "lint", "success"}}, want: "canceled", wantID: 4},
		{name: "waits for a person", checks: []check{{3, "deploy", "manual"}, {4, "lint", "success"}}, want: "manual", wantID: 4},
		{name: "manual while another runs", checks: []check{{3, "deploy", "manual"}, {4, "lint", "pending"}}, want: "running", wantID: 4},
		{name: "all skipped", checks: []check{{3, "a", "skipped"}, {4, "b", "skipped"}}, want: "skipped", wantID: 4},
		{name: "skipped and passed", checks: []check{{3, "a", "skipped"}, {4, "b", "success"}}, want: "success", wantID: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := synthesize("abc", "feature", "u", tt.checks, tt.required)
			switch {
			case tt.want == "" && p != nil:
				t.Fatalf("pipeline = %+v; want none", p)
			case tt.want == "":
			case p == nil || p.Status != tt.want || p.ID != tt.wantID || p.SHA != "abc" || p.Ref != "feature":
				t.Fatalf("pipeline = %+v; want status %s id %d", p, tt.want, tt.wantID)
			}
		})
	}
}

// TestStatusMappings maps GitHub's check and mergeability vocabularies
// onto the ones the flows decide on.
func TestStatusMappings(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ status, conclusion, want string }{
		{"queued", "", "pending"}, {"requested", "", "pending"}, {"in_progress", "", "running"}, {"waiting", "", "manual"},
		{"completed", "success", "success"}, {"completed", "neutral", "success"}, {"completed", "skipped", "skipped"},
		{"completed", "cancelled", "canceled"}, {"completed", "failure", "failed"}, {"completed", "timed_out", "failed"},
		{"completed", "startup_failure", "failed"}, {"completed", "action_required", "failed"}, {"completed", "stale", "failed"},
	} {
		if got := checkRunStatus(tt.status, tt.conclusion); got != tt.want {
			t.Errorf("checkRunStatus(%s, %s) = %s; want %s", tt.status, tt.conclusion, got, tt.want)
		}
	}
	for state, want := range map[string]string{"success": "success", "pending": "running", "failure": "failed", "error": "failed"} {
		if got := commitStatus(state); got != want {
			t.Errorf("commitStatus(%s) = %s; want %s", state, got, want)
		}
	}
	yes, no := true, false
	running := &platform.Pipeline{Status: "running"}
	failed := &platform.Pipeline{Status: platform.PipelineFailed}
	passed := &platform.Pipeline{Status: platform.PipelineSuccess}
	for _, tt := range []struct {
		name      string
		mergeable *bool
		state     string
		head      *platform.Pipeline
		want      string
	}{
		{"null is never false", nil, "unknown", nil, "checking"},
		{"null with a stale clean", nil, "clean", nil, "checking"},
		{"clean", &yes, "clean", passed, "mergeable"},
		{"unstable", &yes, "unstable", running, "mergeable"},
		{"has_hooks", &yes, "has_hooks", nil, "mergeable"},
		{"dirty", &no, "dirty", nil, "conflict"},
		{"false alone", &no, "blocked", nil, "conflict"},
		{"behind", &yes, "behind", nil, "need_rebase"},
		{"draft", &yes, "draft", nil, "draft_status"},
		{"blocked, checks running", &yes, "blocked", running, "ci_still_running"},
		{"blocked, checks failed", &yes, "blocked", failed, "ci_must_pass"},
		{"blocked, checks passed", &yes, "blocked", passed, "not_approved"},
		{"a state GitHub adds later", &yes, "queued_for_merge", nil, "checking"},
	} {
		if got := MergeStatusOf(tt.mergeable, tt.state, tt.head); got != tt.want {
			t.Errorf("%s: MergeStatusOf = %s; want %s", tt.name, got, tt.want)
		}
	}
	for perm, want := range map[string]int{"read": 20, "triage": 20, "write": 30, "maintain": 40, "admin": 50, "none": 0, "": 0} {
		if got := AccessLevelOf(perm); got != want {
			t.Errorf("AccessLevelOf(%q) = %d; want %d", perm, got, want)
		}
	}
}
