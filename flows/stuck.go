package flows

import (
	"time"

	"changebot/flows/rules"
	"changebot/store"
)

// StuckLimits are the durations after which a step counts as stuck
// (StuckBounds): the wait deadlines (settings pipeline.deadline,
// rebase.deadline, deploy.deadline) and the sweeper's quiet time
// (sweeper.after).
type StuckLimits struct {
	PipelineDeadline, RebaseDeadline, DeployDeadline time.Duration
	SweeperAfter                                     time.Duration
}

// StuckBounds returns, for the list API's stuck=true (issue 13 point 1),
// each step's threshold at now: a change is stuck when its step started
// before it. From the step table: a step waiting for the MR pipeline, a
// rebase or merge check, or the deploy is stuck past that wait's deadline;
// any other step a job works in both flow orders (SweepableSteps) past
// sweeper.after; a pending step (parked past its deadline, waiting for
// /resume) at once. Terminal and failed steps, and those that wait for a
// person or the approval system (APPROVAL_SENT, HANDLE_DRAFT), are never
// stuck.
func StuckBounds(now time.Time, l StuckLimits) []store.StuckBound {
	sweepable := map[rules.StepCode]bool{}
	for _, c := range rules.SweepableSteps() {
		sweepable[c] = true
	}
	var out []store.StuckBound
	for _, s := range rules.Catalogue() {
		var limit time.Duration
		switch {
		case s.Terminal:
			continue
		case s.Phase == rules.PhasePending:
			limit = 0
		case s.Wait == rules.WaitPipeline:
			limit = l.PipelineDeadline
		case s.Wait == rules.WaitRebase || s.Wait == rules.WaitMergeCheck:
			limit = l.RebaseDeadline
		case s.Wait == rules.WaitDeploy:
			limit = l.DeployDeadline
		case s.Wait == rules.WaitReady || !sweepable[s.Code]:
			continue
		default:
			limit = l.SweeperAfter
		}
		out = append(out, store.StuckBound{Step: int(s.Code), StartedBefore: now.Add(-limit)})
	}
	return out
}
