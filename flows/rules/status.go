package rules

// Binding statuses (DESIGN §2): the status a step implies (Step.Status).
// They are persisted as these exact strings in bindings.status and
// operations.status, and equal the store's names (store.StatusMerged, ...:
// the store owns the columns, this package the rules over them; a test in
// flows pins that the two agree).
const (
	StatusApprovalSending = "APPROVAL_SENDING"
	StatusApprovalSent    = "APPROVAL_SENT"
	StatusMRCreating      = "MR_CREATING"
	StatusMRCreated       = "MR_CREATED"
	StatusMerging         = "MERGING"
	StatusMerged          = "MERGED"
	StatusValidated       = "VALIDATED"
	StatusCreateFailed    = "CREATE_FAILED"
	StatusHandleFailed    = "HANDLE_FAILED"
	StatusRejected        = "REJECTED"
	StatusClosed          = "CLOSED"
)

// Statuses lists every binding status, in flow order.
func Statuses() []string {
	return []string{
		StatusApprovalSending, StatusApprovalSent, StatusMRCreating, StatusMRCreated,
		StatusMerging, StatusMerged, StatusValidated, StatusCreateFailed,
		StatusHandleFailed, StatusRejected, StatusClosed,
	}
}

// Reappliable reports whether a binding in status may be applied for
// again by a new change (DESIGN §2): the change is finished, applied
// (VALIDATED), refused (REJECTED) or cancelled (CLOSED). It is the rule
// store.IsReappliable implements in SQL.
func Reappliable(status string) bool {
	return status == StatusValidated || status == StatusRejected || status == StatusClosed
}

// Failed reports whether status is a failure that keeps the binding until
// the change is retried or cancelled (CREATE_FAILED, HANDLE_FAILED).
func Failed(status string) bool {
	return status == StatusCreateFailed || status == StatusHandleFailed
}

// Platform names (operations.platform; issue 15), equal to the store's
// (store.PlatformGitLab, store.PlatformGitHub).
const (
	// PlatformGitLab is GitLab; "" means GitLab too (rows from before
	// issue 15 name no platform).
	PlatformGitLab = "gitlab"
	// PlatformGitHub is GitHub (github.com or GitHub Enterprise Server).
	PlatformGitHub = "github"
)
