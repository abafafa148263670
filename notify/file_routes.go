package notify

import (
	"github.com/riverqueue/river"

	"changebot/flows/rules"
	"changebot/repoconfig"
	"changebot/store"
)

// JobsRouted is Jobs with the notification routes of the repository's
// `.changebot.yml` (issue 25 point 2: its `notify` list), for a project
// whose server lets the file set them (policy.allow_override lists
// `notify`). A route naming one of the server's destinations replaces
// that destination's event list for the project's changes; it never widens
// the destination's projects (a destination that does not serve the
// project takes nothing from the file), and a route naming no configured
// destination is ignored. Destinations the file does not name keep the
// server's routing; with no routes every destination routes as the server
// says (Jobs).
func (r *Router) JobsRouted(op store.Operation, e store.Event, routes []repoconfig.Route) []river.InsertManyParams {
	if r == nil || len(r.dests) == 0 || e.Type != store.EventTransition || op.RolloutID != "" {
		return nil
	}
	ev, ok := MoveEvent(rules.StepCode(e.FromStep), rules.StepCode(e.ToStep))
	if !ok {
		return nil
	}
	fileEvents := map[string][]string{}
	for _, rt := range routes {
		fileEvents[rt.Destination] = append(fileEvents[rt.Destination], rt.Events...)
	}
	var jobs []river.InsertManyParams
	var p *Payload
	for _, d := range r.dests {
		if !d.wantsRouted(ev, op, fileEvents) {
			continue
		}
		if p == nil {
			v := NewPayload(ev, op, e)
			p = &v
		}
		jobs = append(jobs, river.InsertManyParams{Args: DeliverArgs{Destination: d.Name, Payload: *p},
			InsertOpts: &river.InsertOpts{Queue: QueueNotifications, MaxAttempts: MaxAttempts}})
	}
	return jobs
}

// wantsRouted is Wants with the file's event lists by destination name.
func (d Destination) wantsRouted(ev Event, op store.Operation, fileEvents map[string][]string) bool {
	events, named := fileEvents[d.Name]
	if !named {
		return d.Wants(ev, op.Project, op.ProjectID)
	}
	all := d
	all.Events = nil // the project filter alone: the file chooses the events
	if !all.Wants(ev, op.Project, op.ProjectID) {
		return false
	}
	for _, e := range events {
		if Event(e) == ev {
			return true
		}
	}
	return false
}
