package flows

import (
	"fmt"

	"github.com/riverqueue/river"

	"changebot/flows/rules"
)

// OperationArgs are the arguments of every job that advances one operation.
// Step is the step the job was enqueued for: a job that finds its operation
// at another step does nothing (steps are idempotent and resumable).
type OperationArgs struct {
	OperationID string `json:"operation_id"`
	Step        int    `json:"step"`
	// Version is the operation version the transition wrote; it makes the
	// job unique per transition (a resume re-enqueues with the current one).
	Version int64 `json:"version"`
}

// RequestApprovalArgs asks the approval system for a decision.
type RequestApprovalArgs OperationArgs

// Kind implements river.JobArgs.
func (RequestApprovalArgs) Kind() string { return rules.KindRequestApproval }

// CreateMRArgs creates branch, commit and merge request.
type CreateMRArgs OperationArgs

// Kind implements river.JobArgs.
func (CreateMRArgs) Kind() string { return rules.KindCreateMR }

// AwaitPipelineArgs waits for the MR pipeline of the current head (polling
// fallback of the pipeline webhook). Polls counts the polls done so far.
type AwaitPipelineArgs OperationArgs

// Kind implements river.JobArgs.
func (AwaitPipelineArgs) Kind() string { return rules.KindAwaitPipeline }

// HandleArgs approves as the reviewer robots and merges.
type HandleArgs OperationArgs

// Kind implements river.JobArgs.
func (HandleArgs) Kind() string { return rules.KindHandle }

// AwaitDeployArgs waits for the deploy pipeline of the merge commit
// (polling fallback of the target-branch pipeline webhook).
type AwaitDeployArgs OperationArgs

// Kind implements river.JobArgs.
func (AwaitDeployArgs) Kind() string { return rules.KindAwaitDeploy }

// CloseMRArgs closes what the create job of a change cancelled in the
// create phase opened without recording it (its merge request, its
// branch); Step is CLOSED.
type CloseMRArgs OperationArgs

// Kind implements river.JobArgs.
func (CloseMRArgs) Kind() string { return rules.KindCloseMR }

// stepJobArgs returns the arguments of a step job of kind (a kind of
// stepJobKinds) for a.
func stepJobArgs(kind string, a OperationArgs) river.JobArgs {
	switch kind {
	case rules.KindRequestApproval:
		return RequestApprovalArgs(a)
	case rules.KindCreateMR:
		return CreateMRArgs(a)
	case rules.KindAwaitPipeline:
		return AwaitPipelineArgs(a)
	case rules.KindHandle:
		return HandleArgs(a)
	case rules.KindAwaitDeploy:
		return AwaitDeployArgs(a)
	}
	panic(fmt.Sprintf("flows: %q is not a step job kind", kind))
}

// RefreshNoteArgs re-renders an operation's status comment. Unique per
// operation and coalescing window when note.delay is 2 s or more, else per
// operation and version (Engine.refreshNoteJobs): a transition never finds
// its job already running (which River's uniqueness would swallow), and a
// job that finds the note already showing its events or newer ones
// (rendered_seq) edits nothing, so several transitions make one edit.
type RefreshNoteArgs struct {
	OperationID string `json:"operation_id"`
	// Version is the operation version whose transition asked for the
	// refresh when each transition has its own job; 0 when the transitions
	// of a coalescing window share one, and in older jobs.
	Version int64 `json:"version,omitempty"`
	// Backstop marks the second refresh of a transition, due after the
	// first one's claim would have expired: if the replica running the
	// first died, the comment is still current within 10 s (issue 10
	// point 6); otherwise it finds the note up to date and edits nothing.
	Backstop bool `json:"backstop,omitempty"`
}

// Kind implements river.JobArgs.
func (RefreshNoteArgs) Kind() string { return rules.KindRefreshNote }
