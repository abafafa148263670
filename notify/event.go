package notify

import (
	"fmt"
	"slices"

	"changebot/flows/rules"
)

// Event is what a notification tells (persisted in the delivery log and
// sent as X-Changebot-Event): one of the constants below.
type Event string

// The notification events (issue 25 point 3).
const (
	// EventFailed: the change entered a failed status (CREATE_FAILED or
	// HANDLE_FAILED) that waits for a fix and /retry, or a cancel.
	EventFailed Event = "failed"
	// EventNeedsPerson: the change waits for a person: an approver's
	// decision (APPROVAL_SENT), an operator's /resume at a parked *_PENDING
	// step, a merge request a person closed (MR_CLOSED), retargeted
	// (HANDLE_RETARGETED) or marked draft (HANDLE_DRAFT).
	EventNeedsPerson Event = "needs_person"
	// EventMerged: the merge request was merged (HANDLE_MERGED).
	EventMerged Event = "merged"
	// EventApplied: the deploy confirmed the change (VALIDATED).
	EventApplied Event = "applied"
)

// Events lists every event, in the order a change meets them.
func Events() []Event { return []Event{EventNeedsPerson, EventFailed, EventMerged, EventApplied} }

// ParseEvent returns the event named s, or an error listing the events.
func ParseEvent(s string) (Event, error) {
	if e := Event(s); slices.Contains(Events(), e) {
		return e, nil
	}
	return "", fmt.Errorf("%q is not an event: want failed, needs_person, merged or applied", s)
}

// EventFor returns the event a move to step to raises, and false when it
// raises none (the steps the bot works through on its own). It is the one
// mapping of steps to events, derived from the step table's rows: the
// steps that wait for a person (rules.NeedsPerson: approval, the parked
// pending phase, a person's close, retarget or draft) are EventNeedsPerson, the other
// steps of a failed status EventFailed, HANDLE_MERGED EventMerged and the
// steps of status VALIDATED EventApplied. An unknown step raises none.
func EventFor(to rules.StepCode) (Event, bool) {
	s, ok := rules.Lookup(to)
	if !ok {
		return "", false
	}
	switch {
	case rules.NeedsPerson(to):
		return EventNeedsPerson, true
	case rules.Failed(s.Status):
		return EventFailed, true
	case to == rules.HandleMerged:
		return EventMerged, true
	case s.Status == rules.StatusValidated:
		return EventApplied, true
	}
	return "", false
}

// MoveEvent returns the event of a move from step from to step to, and
// false when it raises none: EventFor(to), except that staying in a step
// raises nothing and that a change already merged (DEPLOY_PENDING resumed
// to HANDLE_MERGED) is not merged again.
func MoveEvent(from, to rules.StepCode) (Event, bool) {
	if from == to {
		return "", false
	}
	ev, ok := EventFor(to)
	if !ok {
		return "", false
	}
	if s, known := rules.Lookup(from); ev == EventMerged && known && s.Status == rules.StatusMerged {
		return "", false
	}
	return ev, true
}
