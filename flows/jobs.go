package flows

import (
	"fmt"

	"github.com/riverqueue/river"
)

// Job kinds (persisted in river_job.kind: never rename one).
const (
	KindRequestApproval = "request_approval"
	KindCreateMR        = "create_merge_request"
	KindAwaitPipeline   = "await_pipeline"
	KindHandle          = "handle_merge_request"
	KindAwaitDeploy     = "await_deploy"
	KindProcessDelivery = "process_delivery"
	KindRefreshNote     = "refresh_status_note"
	KindCloseMR         = "close_merge_request"
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
func (RequestApprovalArgs) Kind() string { return KindRequestApproval }

// CreateMRArgs creates branch, commit and merge request.
type CreateMRArgs OperationArgs

// Kind implements river.JobArgs.
func (CreateMRArgs) Kind() string { return KindCreateMR }

// AwaitPipelineArgs waits for the MR pipeline of the current head (polling
// fallback of the pipeline webhook). Polls counts the polls done so far.
type AwaitPipelineArgs OperationArgs

// Kind implements river.JobArgs.
func (AwaitPipelineArgs) Kind() string { return KindAwaitPipeline }

// HandleArgs approves as the reviewer robots and merges.
type HandleArgs OperationArgs

// Kind implements river.JobArgs.
func (HandleArgs) Kind() string { return KindHandle }

// AwaitDeployArgs waits for the deploy pipeline of the merge commit
// (polling fallback of the target-branch pipeline webhook).
type AwaitDeployArgs OperationArgs

// Kind implements river.JobArgs.
func (AwaitDeployArgs) Kind() string { return KindAwaitDeploy }

// CloseMRArgs closes what the create job of a change cancelled in the
// create phase opened without recording it (its merge request, its
// branch); Step is CLOSED.
type CloseMRArgs OperationArgs

// Kind implements river.JobArgs.
func (CloseMRArgs) Kind() string { return KindCloseMR }

// stepJobArgs returns the arguments of a step job of kind (a kind of
// stepJobKinds) for a.
func stepJobArgs(kind string, a OperationArgs) river.JobArgs {
	switch kind {
	case KindRequestApproval:
		return RequestApprovalArgs(a)
	case KindCreateMR:
		return CreateMRArgs(a)
	case KindAwaitPipeline:
		return AwaitPipelineArgs(a)
	case KindHandle:
		return HandleArgs(a)
	case KindAwaitDeploy:
		return AwaitDeployArgs(a)
	}
	panic(fmt.Sprintf("flows: %q is not a step job kind", kind))
}

// ProcessDeliveryArgs processes one stored webhook delivery.
type ProcessDeliveryArgs struct {
	DeliveryID int64 `json:"delivery_id"`
}

// Kind implements river.JobArgs.
func (ProcessDeliveryArgs) Kind() string { return KindProcessDelivery }

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
func (RefreshNoteArgs) Kind() string { return KindRefreshNote }

// ProcessDeliveryJob returns the insert parameters of the job that processes
// delivery id (used by the webhook intake in its one transaction).
func ProcessDeliveryJob(id int64) river.InsertManyParams {
	return river.InsertManyParams{Args: ProcessDeliveryArgs{DeliveryID: id}, InsertOpts: &river.InsertOpts{Queue: QueueEvents}}
}

// Queues. Step jobs work in QueueDefault, webhook deliveries in
// QueueEvents and status-note refreshes in QueueNotes, so that a burst of
// one kind never queues the others behind it: a change's next step does not
// wait for the status comments of other changes to be edited.
const (
	QueueDefault = river.QueueDefault
	QueueEvents  = "events"
	QueueNotes   = "notes"
)
