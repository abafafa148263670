package rules

// CheckState is where a change stands on one check of its checklist.
type CheckState string

// Check states (Checklist).
const (
	// CheckDone: the change passed the check.
	CheckDone CheckState = "done"
	// CheckNow: the change is at the check: its step works or waits on it.
	CheckNow CheckState = "now"
	// CheckFailed: the change stopped on the check.
	CheckFailed CheckState = "failed"
	// CheckLater: the change has not come to the check yet.
	CheckLater CheckState = "later"
	// CheckSkipped: the change passed the point of the check without it
	// (a merge queue where none applied).
	CheckSkipped CheckState = "skipped"
)

// Check is one line of a change's "why is this not moving" checklist.
type Check struct {
	// Name says what is checked, in words ("pipeline").
	Name  string
	State CheckState
}

// check is one checklist line of the step table: the steps that work or
// wait on it, those that stop on it, and the steps whose visit means it
// was passed. optional lines are skipped, not later, once a step after
// them (passedBy of the line that follows) was visited without them.
type check struct {
	name     string
	work     []StepCode
	failed   []StepCode
	passedBy []StepCode
	optional bool
}

// checklist is the order a change meets its checks in the step table; the
// approval comes first or after the pipeline by the change's flow order,
// and is listed first either way.
var checklist = []check{
	{name: "approval", work: []StepCode{ApprovalSending, ApprovalSendPending, ApprovalSent},
		failed: []StepCode{ApprovalRejected, ApprovalWithdrawn}},
	{name: "merge request", work: []StepCode{CreateStarted}, failed: []StepCode{CreateFailed, CreateRefused},
		passedBy: []StepCode{CreateMROpened}},
	{name: "pipeline", work: []StepCode{CreateMROpened, CreatePipelinePending, HandleAwaitPipeline, HandlePipelinePending},
		failed: []StepCode{CreatePipelineFailed}, passedBy: []StepCode{CreateSucceeded}},
	{name: "reviewer robots' approvals", work: []StepCode{HandleStarted}, failed: []StepCode{HandleReviewerDenied},
		passedBy: []StepCode{HandleApproved}},
	{name: "target branch as submitted", failed: []StepCode{HandleRetargeted}, passedBy: []StepCode{HandleMerged}},
	{name: "turn in the merge queue", work: []StepCode{HandleQueued, HandleInTrain}, passedBy: []StepCode{HandleMerged}, optional: true},
	{name: "mergeable (rebased, not a draft)", work: []StepCode{HandleApproved, HandleRebasing, HandleRebasePending, HandleMergePending, HandleDraft},
		failed: []StepCode{HandleNotMergeable, HandleRebaseConflict, HandleFailed}, passedBy: []StepCode{HandleMerged}},
	{name: "merge", passedBy: []StepCode{HandleMerged}},
	{name: "deploy confirmation", work: []StepCode{HandleMerged, DeployPending}, passedBy: []StepCode{CalledBack}},
}

// Checklist is the change's checklist from the step table: for each check,
// whether the change at step current, having visited the steps visited
// reports, passed it, is at it, stopped on it, or has it ahead (issue 23:
// the change page's "why is this not moving"). The approval counts as
// passed once the change was sent for it and left the approval steps
// without a refusal; the merge queue line is skipped where the change
// merged without one.
func Checklist(current StepCode, visited func(StepCode) bool) []Check {
	any := func(steps []StepCode) bool {
		for _, s := range steps {
			if s == current || visited(s) {
				return true
			}
		}
		return false
	}
	is := func(steps []StepCode) bool {
		for _, s := range steps {
			if s == current {
				return true
			}
		}
		return false
	}
	out := make([]Check, 0, len(checklist))
	for _, c := range checklist {
		state := CheckLater
		switch {
		case is(c.failed):
			state = CheckFailed
		case is(c.work):
			state = CheckNow
		case c.passedBy == nil && any(c.work):
			// The approval: passed once sent for it and left.
			state = CheckDone
		case c.optional && any(c.passedBy) && !any(c.work):
			state = CheckSkipped
		case any(c.passedBy):
			state = CheckDone
		}
		out = append(out, Check{Name: c.name, State: state})
	}
	return out
}
