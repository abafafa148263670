package rules

// Standing is where one change of a rollout stands, for the rollout's
// state (RolloutStateOf; issue 25 point 3): one of the constants below.
type Standing string

// The standings of a change (StandingOf).
const (
	// StandingMoving: the bot works on the change or waits for the
	// platform (a pipeline, a rebase, the merge queue).
	StandingMoving Standing = "moving"
	// StandingNeedsPerson: the change waits for a person (NeedsPerson).
	StandingNeedsPerson Standing = "needs_person"
	// StandingFailed: a failed status (CREATE_FAILED, HANDLE_FAILED)
	// waiting for a fix and /retry, or a cancel.
	StandingFailed Standing = "failed"
	// StandingMerged: merged (status MERGED), waiting for the deploy's
	// confirmation.
	StandingMerged Standing = "merged"
	// StandingDone: finished: applied (VALIDATED), refused (REJECTED) or
	// cancelled (CLOSED, except a merge request a person closed).
	StandingDone Standing = "done"
)

// NeedsPerson reports whether a change at step waits for a person: an
// approver's decision (APPROVAL_SENT), an operator's /resume at a parked
// *_PENDING step, a merge request a person closed (MR_CLOSED), retargeted
// (HANDLE_RETARGETED) or marked draft (HANDLE_DRAFT). An unknown step does
// not.
func NeedsPerson(step StepCode) bool {
	s, ok := Lookup(step)
	if !ok {
		return false
	}
	return step == ApprovalSent || step == ClosedByPerson || step == HandleRetargeted || step == HandleDraft ||
		s.Phase == PhasePending
}

// StandingOf is the standing of a change at step: NeedsPerson first, then
// its status: failed, MERGED, finished (Reappliable), else moving. An
// unknown step is moving.
func StandingOf(step StepCode) Standing {
	if NeedsPerson(step) {
		return StandingNeedsPerson
	}
	s, ok := Lookup(step)
	switch {
	case !ok:
		return StandingMoving
	case Failed(s.Status):
		return StandingFailed
	case s.Status == StatusMerged:
		return StandingMerged
	case Reappliable(s.Status):
		return StandingDone
	}
	return StandingMoving
}

// RolloutState is the coarse state of a rollout, from its changes'
// standings (RolloutStateOf): one of the constants below.
type RolloutState string

// The states of a rollout, each decided from the counts of its changes by
// standing, in this order (RolloutStateOf).
const (
	// RolloutDone: every change is done.
	RolloutDone RolloutState = "done"
	// RolloutRunning: at least one change is still moving.
	RolloutRunning RolloutState = "running"
	// RolloutFailed: nothing moves and at least one change failed.
	RolloutFailed RolloutState = "failed"
	// RolloutNeedsPerson: nothing moves, nothing failed, and at least one
	// change waits for a person.
	RolloutNeedsPerson RolloutState = "needs_person"
	// RolloutMerged: every change is merged or done, at least one waits
	// for its deploy: the rollout is all merged.
	RolloutMerged RolloutState = "merged"
)

// RolloutStateOf is the state of a rollout whose changes number
// counts[standing] at each standing: done when every change is done (and
// there is one), else running when any is moving, else failed when any
// failed, else needs_person when any waits for a person, else merged. A
// rollout without changes is running.
func RolloutStateOf(counts map[Standing]int) RolloutState {
	total := 0
	for _, n := range counts {
		total += n
	}
	switch {
	case total > 0 && counts[StandingDone] == total:
		return RolloutDone
	case total == 0 || counts[StandingMoving] > 0:
		return RolloutRunning
	case counts[StandingFailed] > 0:
		return RolloutFailed
	case counts[StandingNeedsPerson] > 0:
		return RolloutNeedsPerson
	}
	return RolloutMerged
}

// RolloutToldStates are the rollout states a summary notification tells:
// every state but running. A rollout moves through running between the
// others as its changes move; telling only the states where nothing moves
// (and never the same one twice in a row, which the notifier's record
// ensures) bounds a rollout's messages by its settled states, not by its
// changes.
func RolloutToldStates() []RolloutState {
	return []RolloutState{RolloutNeedsPerson, RolloutFailed, RolloutMerged, RolloutDone}
}

// StepsOf lists the steps whose standing is st (StandingOf), in the step
// table's order: a rollout's progress lists the changes at the steps of
// StandingFailed, then those of StandingNeedsPerson.
func StepsOf(st Standing) []StepCode {
	var out []StepCode
	for _, s := range Catalogue() {
		if StandingOf(s.Code) == st {
			out = append(out, s.Code)
		}
	}
	return out
}
