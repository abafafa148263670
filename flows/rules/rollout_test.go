package rules

import "testing"

func TestStandingOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		step StepCode
		want Standing
	}{
		{CreateStarted, StandingMoving},
		{ApprovalSent, StandingNeedsPerson},
		{ClosedByPerson, StandingNeedsPerson},
		{HandleRetargeted, StandingNeedsPerson},
		{HandleDraft, StandingNeedsPerson},
		{HandleMergePending, StandingNeedsPerson},
		{HandleRebaseConflict, StandingFailed},
		{HandleMerged, StandingMerged},
		{CalledBack, StandingDone},
		{StepCode(1), StandingMoving},
	}
	for _, tt := range tests {
		t.Run(tt.step.String(), func(t *testing.T) {
			t.Parallel()
			if got := StandingOf(tt.step); got != tt.want {
				t.Fatalf("StandingOf(%s) = %s, want %s", tt.step, got, tt.want)
			}
		})
	}
}

func TestRolloutStateOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		counts map[Standing]int
		want   RolloutState
	}{
		{"no changes", nil, RolloutRunning},
		{"all done", map[Standing]int{StandingDone: 3}, RolloutDone},
		{"one moving beats a failure", map[Standing]int{StandingMoving: 1, StandingFailed: 2, StandingDone: 5}, RolloutRunning},
		{"failed beats waiting", map[Standing]int{StandingFailed: 1, StandingNeedsPerson: 4}, RolloutFailed},
		{"waiting for a person", map[Standing]int{StandingNeedsPerson: 4, StandingMerged: 1}, RolloutNeedsPerson},
		{"all merged", map[Standing]int{StandingMerged: 2, StandingDone: 3}, RolloutMerged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := RolloutStateOf(tt.counts); got != tt.want {
				t.Fatalf("RolloutStateOf(%v) = %s, want %s", tt.counts, got, tt.want)
			}
		})
	}
}
