package rules

import (
	"errors"
	"fmt"
	"slices"
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

// Moves returns every legal move out of the step s, derived from its row
// of the step table (DESIGN §2 "one transition table"): the moves its own
// work makes (Next), its job's declared failure in either flow order, /retry
// and /resume, and for a step that may be cancelled, CLOSED, MR_CLOSED and
// HANDLE_MERGED; for a change recorded merged and not validated, CLOSED
// (flows.Engine.Cancel, when GitLab says it was never merged). A merge or
// close a person made in GitLab wins in every such step,
// in the create phase too (issue 9 defect 8): remote state wins (DESIGN §5),
// and /cancel, which finds the merge, must be able to record it.
func (s Step) Moves() []StepCode {
	out := append([]StepCode(nil), s.Next...)
	out = append(out, s.Job.Failure, s.MRFirstJob.Failure, s.Retry)
	if s.Resume != s.Code {
		out = append(out, s.Resume)
	}
	if s.Cancellable() {
		out = append(out, Closed, ClosedByPerson, HandleMerged)
	}
	if s.RecordedMerged() {
		// Only Cancel takes it, once GitLab says the merge request is not
		// merged (a merge recorded on a webhook GitLab contradicts).
		out = append(out, Closed)
	}
	return slices.DeleteFunc(out, func(c StepCode) bool { return c == 0 })
}

// CheckTransition reports whether from -> to is a legal move (see Step.Moves); the
// binding status follows from the steps' rows.
// It returns nil or an *IllegalTransitionError (errors.Is ErrIllegalTransition).
// It is pure: the one function that writes (flows.Engine.Transition) calls it.
func CheckTransition(from, to StepCode) error {
	fs, fok := Lookup(from)
	ts, tok := Lookup(to)
	illegal := &IllegalTransitionError{From: from, To: to, FromStatus: fs.Status, ToStatus: ts.Status}
	if !fok || !tok {
		return illegal
	}
	if fs.Terminal || from == to || !slices.Contains(fs.Moves(), to) {
		return illegal
	}
	return nil
}

// CanMove reports whether from -> to is legal; see CheckTransition.
func CanMove(from, to StepCode) bool { return CheckTransition(from, to) == nil }

// RecordedMerged reports whether s is a step of a change recorded merged
// and not yet validated (HANDLE_MERGED, DEPLOY_PENDING): the steps Cancel
// may leave to CLOSED once GitLab says the merge request is not merged.
func (s Step) RecordedMerged() bool {
	return !s.Terminal && s.Status == StatusMerged
}
