package flows

import (
	"fmt"
	"sort"

	"changebot/store"
)

// StepCode is a fine-grained step status (operation.step). Codes are grouped
// by phase so a prefix aggregates (DESIGN §2): create 100xx, handle 101xx,
// close 102xx, callback 103xx, approval 104xx, pending 105xx. Codes are
// persisted: never renumber one.
type StepCode int

// The step catalogue's codes.
const (
	CreateStarted         StepCode = 10001
	CreateSucceeded       StepCode = 10002
	CreateMROpened        StepCode = 10003
	CreatePipelineFailed  StepCode = 10004
	CreateFailed          StepCode = 10005
	HandleStarted         StepCode = 10101
	HandleApproved        StepCode = 10102
	HandleMerged          StepCode = 10103
	HandleFailed          StepCode = 10104
	HandleRebaseConflict  StepCode = 10105
	HandleRebasing        StepCode = 10106
	HandleReviewerDenied  StepCode = 10107
	HandleNotMergeable    StepCode = 10108
	HandleAwaitPipeline   StepCode = 10109
	Closed                StepCode = 10201
	CalledBack            StepCode = 10301
	ApprovalSending       StepCode = 10401
	ApprovalSent          StepCode = 10402
	ApprovalRejected      StepCode = 10403
	ApprovalWithdrawn     StepCode = 10404
	HandlePipelinePending StepCode = 10501
	CreatePipelinePending StepCode = 10502
	ApprovalSendPending   StepCode = 10503
	HandleRebasePending   StepCode = 10504
	DeployPending         StepCode = 10505
	HandleMergePending    StepCode = 10506
)

// Phase names, the prefix groups of step codes.
const (
	PhaseCreate   = "create"
	PhaseHandle   = "handle"
	PhaseClose    = "close"
	PhaseCallback = "callback"
	PhaseApproval = "approval"
	PhasePending  = "pending"
)

// Hints a person sees in the status comment and the API.
const (
	hintKeepWaiting  = "Keep waiting: changebot is working on it."
	hintFixAndRetry  = "Fix the cause and comment /retry, or contact the maintainers."
	hintUnknownWait  = "Outcome unknown: keep waiting; an operator can /resume."
	hintContactMaint = "Contact the maintainers."
	hintDone         = "Nothing to do: the change is applied."
	hintReapply      = "Nothing to do here; the change may be submitted again."
)

// Step is one row of the step catalogue.
type Step struct {
	Code StepCode
	// Name is the persisted, upper-case name, for example "CREATE_STARTED".
	Name  string
	Phase string
	// Status is the binding status this step implies.
	Status string
	// Terminal steps never move again (a new operation may reuse the binding
	// when the status is reappliable).
	Terminal bool
	// Retryable steps accept /retry.
	Retryable bool
	// Resumable steps accept /resume (pending or in-progress steps).
	Resumable bool
	// Hint is what to do now, shown to people.
	Hint string
}

// catalogue is the one table of step codes (DESIGN §2).
var catalogue = []Step{
	{CreateStarted, "CREATE_STARTED", PhaseCreate, store.StatusMRCreating, false, false, true, hintKeepWaiting},
	{CreateSucceeded, "CREATE_SUCCEEDED", PhaseCreate, store.StatusMRCreated, false, false, true, hintKeepWaiting},
	{CreateMROpened, "CREATE_MR_OPENED", PhaseCreate, store.StatusMRCreating, false, false, true, "Keep waiting: the merge request pipeline is running."},
	{CreatePipelineFailed, "CREATE_PIPELINE_FAILED", PhaseCreate, store.StatusCreateFailed, false, true, false, "The pipeline failed. " + hintFixAndRetry},
	{CreateFailed, "CREATE_FAILED", PhaseCreate, store.StatusCreateFailed, false, true, false, "Creating the merge request failed. " + hintFixAndRetry},
	{HandleStarted, "HANDLE_STARTED", PhaseHandle, store.StatusMerging, false, false, true, hintKeepWaiting},
	{HandleApproved, "HANDLE_APPROVED", PhaseHandle, store.StatusMerging, false, false, true, "Keep waiting: reviewers approved, merging."},
	{HandleMerged, "HANDLE_MERGED", PhaseHandle, store.StatusMerged, false, false, false, "Keep waiting: merged, waiting for the deploy pipeline to apply it."},
	{HandleFailed, "HANDLE_FAILED", PhaseHandle, store.StatusHandleFailed, false, true, false, "Merging failed. " + hintFixAndRetry},
	{HandleRebaseConflict, "HANDLE_REBASE_CONFLICT", PhaseHandle, store.StatusHandleFailed, false, true, false, "The rebase has conflicts: resolve them on the source branch and comment /retry, or contact the maintainers."},
	{HandleRebasing, "HANDLE_REBASING", PhaseHandle, store.StatusMerging, false, false, true, "Keep waiting: rebasing onto the target branch."},
	{HandleReviewerDenied, "HANDLE_REVIEWER_DENIED", PhaseHandle, store.StatusHandleFailed, false, true, false, "A reviewer robot may not approve (token revoked or not eligible). Contact the maintainers, then /retry."},
	{HandleNotMergeable, "HANDLE_NOT_MERGEABLE", PhaseHandle, store.StatusHandleFailed, false, true, false, "GitLab refuses the merge (see the reason). " + hintFixAndRetry},
	{HandleAwaitPipeline, "HANDLE_AWAIT_PIPELINE", PhaseHandle, store.StatusMerging, false, false, true, "Keep waiting: the pipeline of the new head is running."},
	{Closed, "CLOSED", PhaseClose, store.StatusClosed, true, false, false, hintReapply},
	{CalledBack, "CALLED_BACK", PhaseCallback, store.StatusValidated, true, false, false, hintDone},
	{ApprovalSending, "APPROVAL_SENDING", PhaseApproval, store.StatusApprovalSending, false, false, true, "Keep waiting: requesting approval."},
	{ApprovalSent, "APPROVAL_SENT", PhaseApproval, store.StatusApprovalSent, false, false, false, "Waiting for an approver to decide (an operator can cancel)."},
	{ApprovalRejected, "APPROVAL_REJECTED", PhaseApproval, store.StatusRejected, true, false, false, "The change was rejected. " + hintReapply},
	{ApprovalWithdrawn, "APPROVAL_WITHDRAWN", PhaseApproval, store.StatusRejected, true, false, false, "The approval was withdrawn. " + hintReapply},
	{HandlePipelinePending, "HANDLE_PIPELINE_PENDING", PhasePending, store.StatusMerging, false, false, true, hintUnknownWait},
	{CreatePipelinePending, "CREATE_PIPELINE_PENDING", PhasePending, store.StatusMRCreating, false, false, true, hintUnknownWait},
	{ApprovalSendPending, "APPROVAL_SEND_PENDING", PhasePending, store.StatusApprovalSending, false, false, true, "The approval system did not answer. " + hintUnknownWait},
	{HandleRebasePending, "HANDLE_REBASE_PENDING", PhasePending, store.StatusMerging, false, false, true, "The rebase is still running past its deadline. " + hintUnknownWait},
	{HandleMergePending, "HANDLE_MERGE_PENDING", PhasePending, store.StatusMerging, false, false, true, "GitLab has not said whether the merge request can be merged (still checking) past the deadline. " + hintUnknownWait},
	{DeployPending, "DEPLOY_PENDING", PhasePending, store.StatusMerged, false, false, true, "Merged, but no deploy pipeline has confirmed it yet. " + hintUnknownWait},
}

var stepByCode = func() map[StepCode]Step {
	m := make(map[StepCode]Step, len(catalogue))
	for _, s := range catalogue {
		if _, dup := m[s.Code]; dup {
			panic(fmt.Sprintf("flows: duplicate step code %d", s.Code))
		}
		m[s.Code] = s
	}
	return m
}()

// Lookup returns the catalogue row for code and whether it exists.
func Lookup(code StepCode) (Step, bool) {
	s, ok := stepByCode[code]
	return s, ok
}

// MustStep returns the catalogue row for code; it panics on an unknown code,
// which is a programming error (every code used in flows is in the catalogue).
func MustStep(code StepCode) Step {
	s, ok := stepByCode[code]
	if !ok {
		panic(fmt.Sprintf("flows: unknown step code %d", code))
	}
	return s
}

// Catalogue returns a copy of every step, ordered by code.
func Catalogue() []Step {
	out := append([]Step(nil), catalogue...)
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// String returns the step's name, or the number for an unknown code.
func (c StepCode) String() string {
	if s, ok := stepByCode[c]; ok {
		return s.Name
	}
	return fmt.Sprintf("STEP_%d", int(c))
}
