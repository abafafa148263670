package flows_test

import (
	"testing"
	"time"

	"changebot/flows"
	"changebot/flows/rules"
)

// TestStuckBounds: each step's stuck threshold comes from the step table:
// waits past their deadline, other worked steps past sweeper.after, parked
// (pending) steps at once, and no threshold for steps that wait for a
// person or never move.
func TestStuckBounds(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := flows.StuckLimits{PipelineDeadline: 2 * time.Hour, RebaseDeadline: 15 * time.Minute,
		DeployDeadline: 6 * time.Hour, SweeperAfter: 10 * time.Minute}
	got := map[rules.StepCode]time.Duration{}
	for _, b := range flows.StuckBounds(now, l) {
		got[rules.StepCode(b.Step)] = now.Sub(b.StartedBefore)
	}
	for _, c := range []struct {
		step rules.StepCode
		want time.Duration // -1: never stuck
	}{
		{rules.CreateStarted, 10 * time.Minute},
		{rules.CreateMROpened, 2 * time.Hour},
		{rules.HandleAwaitPipeline, 2 * time.Hour},
		{rules.HandleRebasing, 15 * time.Minute},
		{rules.HandleMerged, 6 * time.Hour},
		{rules.ApprovalSending, 10 * time.Minute},
		{rules.CreatePipelinePending, 0},
		{rules.HandleMergePending, 0},
		{rules.ApprovalSent, -1},
		{rules.HandleDraft, -1},
		{rules.CreateFailed, -1},
		{rules.CalledBack, -1},
		{rules.Closed, -1},
	} {
		d, ok := got[c.step]
		switch {
		case c.want < 0 && ok:
			t.Errorf("%s: stuck after %s, want never", c.step, d)
		case c.want >= 0 && (!ok || d != c.want):
			t.Errorf("%s: stuck after %s (listed %v), want %s", c.step, d, ok, c.want)
		}
	}
}
