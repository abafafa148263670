package flows_test

import (
	"testing"
	"time"

	"changebot/flows/flowtest"
	"changebot/flows/rules"
)

// TestCreateStepSharesTheSubmitsProjectRead (issue 12 point 3): the create
// step uses the project GitLab showed the submit check when that was less
// than a minute ago, and reads it again otherwise (a project's settings are
// never taken from an older answer). The submit check itself always asks.
func TestCreateStepSharesTheSubmitsProjectRead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		approval time.Duration // from submit to the approver's decision
		reads    int           // GET project in all
	}{
		{name: "approved within a minute", approval: 30 * time.Second, reads: 1},
		{name: "approved after a minute", approval: time.Minute, reads: 2},
		{name: "approved after an hour", approval: time.Hour, reads: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := flowtest.New(t, nil)
			op := h.Submit(t, flowtest.Change("svc"))
			h.WorkUntilIdle(t)
			h.Advance(tt.approval)
			h.Decide(t, op.ID, rules.DecisionApproved)
			h.WorkUntilIdle(t)
			h.RequireStep(t, op.ID, rules.CreateMROpened)
			if got := h.GitLab.CallsByEndpoint()[epProject]; got != tt.reads {
				t.Fatalf("%d project reads, want %d", got, tt.reads)
			}
		})
	}
}
