package rules

// Approval decisions of the callback contract.
const (
	DecisionApproved  = "approved"
	DecisionRejected  = "rejected"
	DecisionWithdrawn = "withdrawn"
)

// Callback results (the body of the 200 answer).
const (
	ResultAccepted       = "ACCEPTED"
	ResultDuplicate      = "DUPLICATE"
	ResultIgnoredStale   = "IGNORED_STALE"
	ResultIgnoredUnknown = "IGNORED_UNKNOWN"
	// ResultFailedRecorded answers a deploy callback with status "failed"
	// for a MERGED change: the failure is written on the change (its detail
	// and an event, shown by the status comment and the change's page) and
	// moves nothing; the change stays MERGED until a deploy succeeds.
	ResultFailedRecorded = "FAILED_RECORDED"
)

// ApprovalCallback is one decision from the approval system.
type ApprovalCallback struct {
	RequestID   string
	OperationID string
	TicketID    string
	Decision    string
	Approver    string
	Ext         map[string]any
}

// DeployCallback is a deploy system's "this merge is applied".
type DeployCallback struct {
	RequestID      string
	ProjectID      int64
	MRIID          int64
	MergeCommitSHA string
	Status         string
}

// Approval providers (setting approval.provider, per project).
const (
	ProviderExternal = "external"
	ProviderGitLab   = "gitlab"
)

// GitLabTicket is the ticket id of an operation whose approval is
// collected in GitLab (in-GitLab approval mode).
const GitLabTicket = "gitlab"

// Decisions of the in-GitLab approval mode.
const (
	GitLabApprove   = "approve"
	GitLabReject    = "reject"
	GitLabUnapprove = "unapprove"
)
