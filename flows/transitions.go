package flows

import (
	"errors"
	"fmt"

	"changebot/store"
)

// ErrIllegalTransition is returned (wrapped in *IllegalTransitionError) for
// a move that the transition table does not allow. Nothing is written.
var ErrIllegalTransition = errors.New("illegal transition")

// IllegalTransitionError names the refused move.
type IllegalTransitionError struct {
	From, To             StepCode
	FromStatus, ToStatus string
}

// Error implements error.
func (e *IllegalTransitionError) Error() string {
	return fmt.Sprintf("illegal transition %s (%s) -> %s (%s)", e.From, e.FromStatus, e.To, e.ToStatus)
}

// Is makes errors.Is(err, ErrIllegalTransition) hold.
func (e *IllegalTransitionError) Is(target error) bool { return target == ErrIllegalTransition }

// retryHandle are the moves out of a handle failure: /retry (back to
// HANDLE_STARTED), a merge found on re-reading GitLab, or cancel. MERGED
// steps are not cancellable: the configuration is on the target branch, so
// calling it CLOSED (re-appliable) would be a lie (deviation from DESIGN §2
// "any non-terminal -> CLOSED", noted in the issue note).
var retryHandle = []StepCode{HandleStarted, HandleMerged, Closed}

// stepMoves is the one table of legal step moves (DESIGN §2). Binding status
// moves are checked against statusMoves below; both must hold.
var stepMoves = map[StepCode][]StepCode{
	ApprovalSending:       {ApprovalSent, ApprovalSendPending, CreateStarted, HandleStarted, ApprovalRejected, ApprovalWithdrawn, Closed},
	ApprovalSendPending:   {ApprovalSending, ApprovalSent, CreateStarted, HandleStarted, ApprovalRejected, ApprovalWithdrawn, Closed},
	ApprovalSent:          {CreateStarted, HandleStarted, ApprovalRejected, ApprovalWithdrawn, Closed},
	CreateStarted:         {CreateMROpened, CreateFailed, Closed},
	CreateMROpened:        {CreateSucceeded, CreatePipelineFailed, CreatePipelinePending, CreateFailed, Closed},
	CreatePipelinePending: {CreateMROpened, CreateSucceeded, CreatePipelineFailed, CreateFailed, Closed},
	// A job that fails at CREATE_SUCCEEDED, before its first move, still
	// ends in its declared failure step (handle: HANDLE_FAILED; MR-first
	// approval request: APPROVAL_SEND_PENDING).
	CreateSucceeded:       {HandleStarted, ApprovalSending, HandleFailed, ApprovalSendPending, Closed},
	CreatePipelineFailed:  {CreateStarted, Closed},
	CreateFailed:          {CreateStarted, Closed},
	HandleStarted:         {HandleApproved, HandleMerged, HandleFailed, HandleReviewerDenied, HandleNotMergeable, HandleRebasing, HandleAwaitPipeline, Closed},
	HandleApproved:        {HandleStarted, HandleMerged, HandleFailed, HandleNotMergeable, HandleRebaseConflict, HandleRebasing, HandleAwaitPipeline, HandleMergePending, Closed},
	HandleMergePending:    {HandleApproved, HandleMerged, HandleFailed, Closed},
	HandleRebasing:        {HandleAwaitPipeline, HandleRebaseConflict, HandleRebasePending, HandleFailed, HandleMerged, Closed},
	HandleRebasePending:   {HandleRebasing, HandleAwaitPipeline, HandleRebaseConflict, HandleFailed, HandleMerged, Closed},
	HandleAwaitPipeline:   {HandleStarted, HandleFailed, HandlePipelinePending, HandleMerged, Closed},
	HandlePipelinePending: {HandleAwaitPipeline, HandleStarted, HandleFailed, HandleMerged, Closed},
	HandleFailed:          retryHandle,
	HandleRebaseConflict:  retryHandle,
	HandleReviewerDenied:  retryHandle,
	HandleNotMergeable:    retryHandle,
	HandleMerged:          {CalledBack, DeployPending},
	DeployPending:         {CalledBack, HandleMerged},
	// Terminal: Closed, CalledBack, ApprovalRejected, ApprovalWithdrawn.
}

// statusMoves is the table of legal binding status moves (DESIGN §2 state
// diagram, both orders). Staying in the same status is always legal when the
// step move is.
var statusMoves = map[string][]string{
	store.StatusApprovalSending: {store.StatusApprovalSent, store.StatusMRCreating, store.StatusMerging, store.StatusRejected, store.StatusClosed},
	store.StatusApprovalSent:    {store.StatusMRCreating, store.StatusMerging, store.StatusRejected, store.StatusClosed},
	store.StatusMRCreating:      {store.StatusMRCreated, store.StatusCreateFailed, store.StatusClosed},
	store.StatusMRCreated:       {store.StatusMerging, store.StatusApprovalSending, store.StatusHandleFailed, store.StatusClosed},
	store.StatusCreateFailed:    {store.StatusMRCreating, store.StatusClosed},
	store.StatusMerging:         {store.StatusMerged, store.StatusHandleFailed, store.StatusClosed},
	store.StatusHandleFailed:    {store.StatusMerging, store.StatusMerged, store.StatusClosed},
	store.StatusMerged:          {store.StatusValidated},
}

// CheckTransition reports whether from -> to is a legal move of both layers.
// It returns nil or an *IllegalTransitionError (errors.Is ErrIllegalTransition).
// It is pure: the one function that writes (Engine.Transition) calls it.
func CheckTransition(from, to StepCode) error {
	fs, fok := Lookup(from)
	ts, tok := Lookup(to)
	illegal := &IllegalTransitionError{From: from, To: to, FromStatus: fs.Status, ToStatus: ts.Status}
	if !fok || !tok {
		return illegal
	}
	if !contains(stepMoves[from], to) {
		return illegal
	}
	if fs.Status != ts.Status && !contains(statusMoves[fs.Status], ts.Status) {
		return illegal
	}
	return nil
}

// CanMove reports whether from -> to is legal; see CheckTransition.
func CanMove(from, to StepCode) bool { return CheckTransition(from, to) == nil }

func contains[T comparable](xs []T, x T) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
