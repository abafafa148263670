package api

import (
	"strings"
	"testing"

	"changebot/flows/rules"
	"changebot/store"
)

// TestAPIHintOffersResumeOnlyWhenParked: the hint of a change without a
// merge request names POST …/resume only for a step that waits for an
// operator (a pending step). APPROVAL_SENDING and CREATE_STARTED have a job
// that retries by itself: their hint used to say "an operator resumes it",
// which sent people to act on a change that needed nobody.
func TestAPIHintOffersResumeOnlyWhenParked(t *testing.T) {
	t.Parallel()
	const url = "https://changebot.example/api/v1/changes/op_1"
	tests := []struct {
		step       rules.StepCode
		platform   string
		wantResume bool
	}{
		{rules.ApprovalSending, store.PlatformGitLab, false},
		{rules.CreateStarted, store.PlatformGitLab, false},
		{rules.ApprovalSending, store.PlatformGitHub, false},
		{rules.ApprovalSendPending, store.PlatformGitLab, true},
		{rules.ApprovalSendPending, store.PlatformGitHub, true},
	}
	for _, tt := range tests {
		st := rules.MustStep(tt.step)
		got := apiHint(st, tt.platform, url)
		if !strings.HasPrefix(got, st.HintOn(tt.platform)) {
			t.Errorf("%s on %s: %q does not start with the step's hint", st.Name, tt.platform, got)
		}
		if has := strings.Contains(got, url+"/resume"); has != tt.wantResume {
			t.Errorf("%s on %s: %q names POST …/resume: %v, want %v", st.Name, tt.platform, got, has, tt.wantResume)
		}
		if !tt.wantResume && strings.Contains(strings.ToLower(got), "operator") {
			t.Errorf("%s on %s: %q asks an operator to act on a step in progress", st.Name, tt.platform, got)
		}
	}
}
