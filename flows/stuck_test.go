package flows_test

import (
	"testing"
	"time"

	"changebot/flows"
)

// TestStuckBounds: each step's stuck threshold comes from the step table:
// waits past their deadline, other worked steps past sweeper.after, parked
// (pending) steps at once, and no threshold for steps that wait for a
// person or never move.
func TestStuckBounds(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	l := flows.StuckLimits{PipelineDeadline: 2 * time.Hour, RebaseDeadline: 15 * time.Minute,
		DeployDeadline: 6 * time.Hour, SweeperAfter: 10 * time.Minute}
	got := map[flows.StepCode]time.Duration{}
	for _, b := range flows.StuckBounds(now, l) {
		got[flows.StepCode(b.Step)] = now.Sub(b.StartedBefore)
	}
	for _, c := range []struct {
		step flows.StepCode
		want time.Duration // -1: never stuck
	}{
		{flows.CreateStarted, 10 * time.Minute},
		{flows.CreateMROpened, 2 * time.Hour},
		{flows.HandleAwaitPipeline, 2 * time.Hour},
		{flows.HandleRebasing, 15 * time.Minute},
		{flows.HandleMerged, 6 * time.Hour},
		{flows.ApprovalSending, 10 * time.Minute},
		{flows.CreatePipelinePending, 0},
		{flows.HandleMergePending, 0},
		{flows.ApprovalSent, -1},
		{flows.HandleDraft, -1},
		{flows.CreateFailed, -1},
		{flows.CalledBack, -1},
		{flows.Closed, -1},
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
