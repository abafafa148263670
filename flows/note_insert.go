package flows

import (
	"context"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"changebot/flows/rules"
)

// Plugins implements river.JobArgsWithPlugins: every River client that
// inserts a status note refresh (the store's, in the transition's
// transaction) inserts it through noteDueInsert.
func (RefreshNoteArgs) Plugins() []rivertype.Plugin { return []rivertype.Plugin{&noteDueInsert{}} }

// noteDueInsert inserts the status note refreshes of a batch "available"
// at their due time (scheduled_at still in the future) instead of
// "scheduled" (issue 21 point 9).
//
// River hands a scheduled job to a worker only once its job scheduler has
// made it available, and that scheduler runs on the elected leader alone.
// A replica killed with SIGKILL stays leader until its term expires
// (River's leader TTL: 15 s after its last reelection), and its successor
// wins only at its next attempt (every 5 s): every refresh, all due
// note.delay after their transition, waited 12–16 s after the restart,
// and the comment with them, although the change itself moved on at once
// (webhook deliveries and the steps' own jobs are inserted available).
// River's fetch takes an available job only once scheduled_at has passed,
// on any replica; it is how River itself stores short snoozes and retries,
// and how its scheduler stores the jobs due within its look-ahead. So the
// refresh still runs note.delay after its transition, coalescing as
// before, without waiting for a leader.
//
// Nothing else changes: River computed the job's unique key (the
// coalescing window of its scheduled time) before the insert middleware
// runs, uniqueActive counts available jobs as it counts scheduled ones,
// and the note's claim and rendered_seq still keep a duplicate or late
// refresh from writing twice. It leaves the batch's other jobs (and a
// refresh inserted pending) as they are.
type noteDueInsert struct{ river.MiddlewareDefaults }

// InsertMany implements rivertype.JobInsertMiddleware.
func (*noteDueInsert) InsertMany(ctx context.Context, params []*rivertype.JobInsertParams,
	doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	for _, p := range params {
		if p.Kind == rules.KindRefreshNote && p.State == rivertype.JobStateScheduled {
			p.State = rivertype.JobStateAvailable
		}
	}
	return doInner(ctx)
}
