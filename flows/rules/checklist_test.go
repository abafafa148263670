package rules

import (
	"fmt"
	"strings"
	"testing"
)

// TestChecklist: each line of the checklist is done, now, failed, later or
// skipped by the step a change is at and the steps it visited.
func TestChecklist(t *testing.T) {
	t.Parallel()
	path := func(steps ...StepCode) func(StepCode) bool {
		return func(s StepCode) bool {
			for _, v := range steps {
				if v == s {
					return true
				}
			}
			return false
		}
	}
	// Lines in order: approved, MR opened, pipeline, robots, target, queue,
	// mergeable, merged, applied (D done, N now, F failed, L later, S
	// skipped).
	tests := []struct {
		name    string
		current StepCode
		visited func(StepCode) bool
		want    string
	}{
		{"waiting for approval first", ApprovalSent, path(ApprovalSending), "NLLLLLLLL"},
		{"approved, MR being opened", CreateStarted, path(ApprovalSending, ApprovalSent), "DNLLLLLLL"},
		{"rejected", ApprovalRejected, path(ApprovalSending, ApprovalSent), "FLLLLLLLL"},
		{"MR first, waiting for the pipeline", CreateMROpened, path(CreateStarted), "LDNLLLLLL"},
		{"pipeline failed", CreatePipelineFailed, path(CreateStarted, CreateMROpened), "LDFLLLLLL"},
		{"create failed before the MR", CreateFailed, path(CreateStarted), "LFLLLLLLL"},
		{"robots approving", HandleStarted, path(ApprovalSent, CreateStarted, CreateMROpened, CreateSucceeded), "DDDNLLLLL"},
		{"waiting in the queue", HandleQueued, path(ApprovalSent, CreateMROpened, CreateSucceeded, HandleStarted, HandleApproved), "DDDDLNLLL"},
		{"a draft", HandleDraft, path(ApprovalSent, CreateMROpened, CreateSucceeded, HandleStarted, HandleApproved), "DDDDLLNLL"},
		{"retargeted", HandleRetargeted, path(ApprovalSent, CreateMROpened, CreateSucceeded, HandleStarted, HandleApproved), "DDDDFLLLL"},
		{"merged, waiting for the deploy", DeployPending, path(ApprovalSent, CreateMROpened, CreateSucceeded, HandleStarted,
			HandleApproved, HandleMerged), "DDDDDSDDN"},
		{"applied after a queue", CalledBack, path(ApprovalSent, CreateMROpened, CreateSucceeded, HandleStarted, HandleApproved,
			HandleQueued, HandleMerged, DeployPending), "DDDDDDDDD"},
	}
	letter := map[CheckState]string{CheckDone: "D", CheckNow: "N", CheckFailed: "F", CheckLater: "L", CheckSkipped: "S"}
	for _, tc := range tests {
		var got strings.Builder
		checks := Checklist(tc.current, tc.visited)
		for _, c := range checks {
			got.WriteString(letter[c.State])
		}
		if got.String() != tc.want {
			t.Errorf("%s: %s, want %s (%s)", tc.name, got.String(), tc.want, fmt.Sprint(checks))
		}
	}
}
