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
// (subject_id, target_key) may be applied for again (DESIGN §2). It is the
// one definition: the store's insert and the API's 409 check both use it.
var Reappliable = map[string]bool{StatusRejected: true, StatusClosed: true}

// IsReappliable reports whether a binding in status may be reset for a new
// operation. VALIDATED is deliberately not reappliable: a validated binding is
// the live configuration, and a new change for it is a new relation only after
// it has been closed (DESIGN §2).
func IsReappliable(status string) bool { return Reappliable[status] }
