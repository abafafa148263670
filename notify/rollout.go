package notify

import (
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"changebot/flows/rules"
	"changebot/store"
)

// MaxRolloutListed bounds the changes a rollout summary lists (Rollout
// Summary.Attention); the others are counted in More.
const MaxRolloutListed = 20

// maxRolloutText bounds the changes a summary's one line names.
const maxRolloutText = 5

// RolloutSummary is a rollout's progress (issue 25 point 3) as a summary
// notification carries it (Payload.Rollout) and the API shows it: the
// `rollout` object of docs/notifications.md.
type RolloutSummary struct {
	ID string `json:"id"`
	// State is the rollout's state (rules.RolloutStateOf).
	State rules.RolloutState `json:"state"`
	// Total is the number of its changes; Counts their number by binding
	// status (only statuses some change is in).
	Total  int            `json:"total"`
	Counts map[string]int `json:"counts"`
	// Applied, Failed and NeedsPerson count the changes VALIDATED, in a
	// failed standing and waiting for a person (rules.StandingOf).
	Applied     int `json:"applied"`
	Failed      int `json:"failed"`
	NeedsPerson int `json:"needs_person"`
	// Attention are changes that failed, then changes that wait for a
	// person, each group oldest update first (as the store lists them:
	// RolloutReadParams), at most the limit asked;
	// More counts those left out.
	Attention []RolloutChange `json:"attention"`
	More      int             `json:"more"`
	// FirstCreatedAt is when its first change was submitted,
	// LastUpdatedAt when one last moved (UTC).
	FirstCreatedAt time.Time `json:"first_created_at"`
	LastUpdatedAt  time.Time `json:"last_updated_at"`
}

// RolloutChange is a change a rollout summary lists.
type RolloutChange struct {
	OperationID string `json:"operation_id"`
	Project     string `json:"project"`
	// ProjectID is the platform's project id (the API's merge_request
	// shows it; the notification's payload names the project by path).
	ProjectID int64  `json:"-"`
	SubjectID string `json:"subject_id"`
	TargetKey string `json:"target_key"`
	// Standing is failed or needs_person.
	Standing rules.Standing `json:"standing"`
	Status   string         `json:"status"`
	Step     string         `json:"step"`
	StepCode int            `json:"step_code"`
	Detail   string         `json:"detail"`
	// MergeRequest is nil before one is opened.
	MergeRequest *PayloadMR `json:"merge_request"`
}

// RolloutReadParams is what ReadRollout needs to read for a summary of
// rollout id listing at most limit changes: those at a failed step, then
// those at a step that waits for a person (rules.StepsOf).
func RolloutReadParams(id string, limit int) store.RolloutReadParams {
	p := store.RolloutReadParams{ID: id, ListLimit: limit}
	for _, st := range []rules.Standing{rules.StandingFailed, rules.StandingNeedsPerson} {
		var steps []int
		for _, s := range rules.StepsOf(st) {
			steps = append(steps, int(s))
		}
		p.Lists = append(p.Lists, steps)
	}
	return p
}

// SummarizeRollout is the summary of r, read with RolloutReadParams.
func SummarizeRollout(r store.Rollout) RolloutSummary {
	s := RolloutSummary{ID: r.ID, Total: r.Total(), Counts: map[string]int{}, Attention: []RolloutChange{},
		FirstCreatedAt: r.FirstCreatedAt(), LastUpdatedAt: r.LastUpdatedAt()}
	standings := map[rules.Standing]int{}
	for _, c := range r.Counts {
		st := rules.StandingOf(rules.StepCode(c.Step))
		standings[st] += c.Count
		s.Counts[c.Status] += c.Count
		if c.Status == rules.StatusValidated {
			s.Applied += c.Count
		}
	}
	s.State = rules.RolloutStateOf(standings)
	s.Failed, s.NeedsPerson = standings[rules.StandingFailed], standings[rules.StandingNeedsPerson]
	for _, op := range r.Listed {
		step := rules.StepCode(op.Step)
		c := RolloutChange{OperationID: op.ID, Project: op.Project, ProjectID: op.ProjectID, SubjectID: op.SubjectID, TargetKey: op.TargetKey,
			Standing: rules.StandingOf(step), Status: op.Status, Step: step.String(), StepCode: op.Step, Detail: op.Detail}
		if op.MRIID > 0 {
			c.MergeRequest = &PayloadMR{IID: op.MRIID, WebURL: op.MRWebURL}
		}
		s.Attention = append(s.Attention, c)
	}
	s.More = s.Failed + s.NeedsPerson - len(s.Attention)
	return s
}

// RolloutEvent is the event a summary of a rollout in state tells, and
// false for a state no summary tells (rules.RolloutToldStates): failed,
// needs_person, merged (all merged) and applied (done).
func RolloutEvent(state rules.RolloutState) (Event, bool) {
	switch state {
	case rules.RolloutFailed:
		return EventFailed, true
	case rules.RolloutNeedsPerson:
		return EventNeedsPerson, true
	case rules.RolloutMerged:
		return EventMerged, true
	case rules.RolloutDone:
		return EventApplied, true
	}
	return "", false
}

// RolloutDeliveryKey is the idempotency key of a rollout's notice-th
// summary: "rollout:<rollout_id>:<notice>".
func RolloutDeliveryKey(id string, notice int64) string {
	return "rollout:" + id + ":" + fmt.Sprint(notice)
}

// RolloutNotice is the store's RolloutNotice of the router (for
// store.TransitionParams.Rollout): a move of a change with a rollout
// tells the rollout's state when it is a told one (RolloutEvent) other
// than the last told, once, to every destination that wants its event for
// one of the rollout's projects. The payload is the moving change's
// (NewPayload) with Rollout set and the rollout's delivery key. A nil
// router returns nil: no rollout is told (and Jobs tells none of its
// changes either).
func (r *Router) RolloutNotice() *store.RolloutNotice {
	if r == nil || len(r.dests) == 0 {
		return nil
	}
	p := RolloutReadParams("", MaxRolloutListed)
	return &store.RolloutNotice{Lists: p.Lists, ListLimit: p.ListLimit, Decide: r.decideRollout}
}

// decideRollout is RolloutNotice's Decide.
func (r *Router) decideRollout(ro store.Rollout, last store.RolloutMark, op store.Operation, e store.Event) (string, []river.InsertManyParams) {
	sum := SummarizeRollout(ro)
	ev, told := RolloutEvent(sum.State)
	if !told || string(sum.State) == last.State {
		return "", nil
	}
	var jobs []river.InsertManyParams
	var p *Payload
	for _, d := range r.dests {
		if !wantsRollout(d, ev, ro) {
			continue
		}
		if p == nil {
			v := NewPayload(ev, op, e)
			v.IdempotencyKey = RolloutDeliveryKey(ro.ID, last.Notices+1)
			v.Rollout = &sum
			p = &v
		}
		jobs = append(jobs, river.InsertManyParams{Args: DeliverArgs{Destination: d.Name, Payload: *p},
			InsertOpts: &river.InsertOpts{Queue: QueueNotifications, MaxAttempts: MaxAttempts}})
	}
	return string(sum.State), jobs
}

// wantsRollout reports whether d takes event ev for one of ro's projects.
func wantsRollout(d Destination, ev Event, ro store.Rollout) bool {
	for _, c := range ro.Counts {
		if d.Wants(ev, c.Project, c.ProjectID) {
			return true
		}
	}
	return false
}

// RolloutText is the one line of a rollout summary, for example
// "37 of 200 applied, 2 failed: svc-a/prod (CREATE_PIPELINE_FAILED),
// svc-b/prod (HANDLE_REBASE_CONFLICT)": the applied of the total, the
// failed and waiting counts when not 0, and the listed changes' subject
// and target with their step, at most 5, then "…and N more".
func RolloutText(s RolloutSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d applied", s.Applied, s.Total)
	if s.Failed > 0 {
		fmt.Fprintf(&b, ", %d failed", s.Failed)
	}
	if s.NeedsPerson > 0 {
		fmt.Fprintf(&b, ", %d need a person", s.NeedsPerson)
	}
	if len(s.Attention) == 0 {
		return b.String()
	}
	b.WriteString(": ")
	n := min(len(s.Attention), maxRolloutText)
	for i, c := range s.Attention[:n] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s/%s (%s)", oneLine(c.SubjectID, 60), oneLine(c.TargetKey, 60), c.Step)
	}
	if more := len(s.Attention) - n + s.More; more > 0 {
		fmt.Fprintf(&b, " …and %d more", more)
	}
	return b.String()
}
