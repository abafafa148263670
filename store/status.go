package store

// Binding statuses (DESIGN §2). They are persisted as these exact strings in
// bindings.status and operations.status.
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

// AllStatuses lists every binding status, in flow order.
var AllStatuses = []string{
	StatusApprovalSending, StatusApprovalSent, StatusMRCreating, StatusMRCreated,
	StatusMerging, StatusMerged, StatusValidated, StatusCreateFailed,
	StatusHandleFailed, StatusRejected, StatusClosed,
}

// Reappliable is the set of binding statuses after which the same
// (subject_id, target_key) may be applied for again (DESIGN §2): the
// change is finished, applied (VALIDATED), refused (REJECTED) or cancelled
// (CLOSED), and a new change takes the binding over, reset in place. It is
// the one definition: the store's insert, the admission count and the
// API's 409 all use it.
var Reappliable = map[string]bool{StatusValidated: true, StatusRejected: true, StatusClosed: true}

// IsReappliable reports whether a binding in status may be reset for a new
// operation.
func IsReappliable(status string) bool { return Reappliable[status] }

// IsFailed reports whether status is a failure that keeps the binding until
// the change is retried or cancelled (CREATE_FAILED, HANDLE_FAILED).
func IsFailed(status string) bool {
	return status == StatusCreateFailed || status == StatusHandleFailed
}
