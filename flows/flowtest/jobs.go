package flowtest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"changebot/flows"
	"changebot/platform"
	"changebot/platform/github"
	"changebot/platform/gitlab"
	"changebot/platform/gitlab/gitlabfake"
	"changebot/store"
	"changebot/webhooks"
)

// MaxJobsPerRun bounds WorkUntilIdle: more jobs than this in one call means
// jobs keep making each other due at the same instant (a livelock), and the
// test fails naming the last ones.
const MaxJobsPerRun = 500

// jobTimeout bounds one job: a job that blocks (say, on a row the worked
// job's own transaction holds) fails the test instead of hanging it.
const jobTimeout = 30 * time.Second

// Worked is one job WorkUntilIdle worked.
type Worked struct {
	ID   int64
	Kind string
	// Args is the job's encoded arguments.
	Args string
	// Event is what River recorded: completed, snoozed, retryable
	// (job_failed with attempts left), cancelled or discarded.
	Event river.EventKind
	// Err is the error the worker returned (nil for a snooze).
	Err error
}

func (w Worked) String() string {
	s := fmt.Sprintf("%s#%d %s -> %s", w.Kind, w.ID, w.Args, w.Event)
	if w.Err != nil {
		s += ": " + w.Err.Error()
	}
	return s
}

// anyJob is the args type of the harness's one rivertest worker, which
// dispatches on the job row's kind to the engine's workers.
type anyJob struct{}

// Kind implements river.JobArgs; never inserted.
func (anyJob) Kind() string { return "flowtest_dispatch" }

type dispatcher struct {
	river.WorkerDefaults[anyJob]
	funcs map[string]flows.JobWorkFunc
}

// Work implements river.Worker.
func (d *dispatcher) Work(ctx context.Context, job *river.Job[anyJob]) error {
	f, ok := d.funcs[job.Kind]
	if !ok {
		return river.JobCancel(fmt.Errorf("no worker for job kind %q", job.Kind))
	}
	return f(ctx, job.JobRow)
}

// liveStates are the states of a job that has not finished.
var liveStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStateScheduled,
	rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStatePending}

// Jobs lists the jobs that have not finished (available, scheduled,
// retryable, running, pending), of the given kinds or of every kind, in the
// order WorkUntilIdle would take them.
func (h *Harness) Jobs(t testing.TB, kinds ...string) []*rivertype.JobRow {
	t.Helper()
	p := river.NewJobListParams().States(liveStates...).First(10_000)
	if len(kinds) > 0 {
		p = p.Kinds(kinds...)
	}
	res, err := h.jobs.JobList(context.Background(), p)
	if err != nil {
		t.Fatalf("listing jobs: %v", err)
	}
	now := h.Now()
	rows := res.Jobs
	slices.SortStableFunc(rows, func(a, b *rivertype.JobRow) int {
		return cmp.Or(dueAt(a, now).Compare(dueAt(b, now)), cmp.Compare(a.ID, b.ID))
	})
	return rows
}

// dueAt is when River would run job on the harness clock. A job inserted
// to run at once carries the database's time (scheduled_at = created_at,
// both now() of the inserting transaction), not the harness clock's: it is
// due now. Every other time (a delay, a snooze, a retry) was computed from
// the harness clock.
func dueAt(job *rivertype.JobRow, now time.Time) time.Time {
	if job.State == rivertype.JobStateAvailable && job.ScheduledAt.Equal(job.CreatedAt) && job.ScheduledAt.After(now) {
		return now
	}
	return job.ScheduledAt
}

// DueJobs lists the jobs WorkUntilIdle would work now: available,
// scheduled or retryable ones whose time has come on the harness clock.
func (h *Harness) DueJobs(t testing.TB) []*rivertype.JobRow {
	t.Helper()
	now := h.Now()
	var due []*rivertype.JobRow
	for _, j := range h.Jobs(t) {
		switch j.State {
		case rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable:
			if !dueAt(j, now).After(now) {
				due = append(due, j)
			}
		}
	}
	return due
}

// NextDue returns how far the clock must move for the next job to become
// due, and false when no job waits.
func (h *Harness) NextDue(t testing.TB) (time.Duration, bool) {
	t.Helper()
	now := h.Now()
	for _, j := range h.Jobs(t) {
		if j.State == rivertype.JobStateRunning || j.State == rivertype.JobStatePending {
			continue
		}
		return max(dueAt(j, now).Sub(now), 0), true
	}
	return 0, false
}

// WorkUntilIdle works every job that is due at the harness clock's time,
// one at a time, each through rivertest's worker in a transaction of its own
// (so River records the attempt, snooze, retry or completion exactly as a
// running client would), including jobs that the worked jobs make due, until
// none is due. Before each job the fake GitLab is settled. It returns what it
// worked; a job that returns an error is recorded in its Worked, not fatal.
func (h *Harness) WorkUntilIdle(t testing.TB) []Worked {
	t.Helper()
	var done []Worked
	for {
		h.Settle(t)
		due := h.DueJobs(t)
		if len(due) == 0 {
			return done
		}
		if len(done) >= MaxJobsPerRun {
			t.Fatalf("jobs keep becoming due at %s; last ones: %v", h.Now().Format(time.RFC3339), done[len(done)-10:])
		}
		done = append(done, h.work(t, due[0]))
	}
}

// RunFor advances the clock to each next due job and works it, until d has
// passed or no job waits: what a running River client does in d. It returns
// what it worked.
func (h *Harness) RunFor(t testing.TB, d time.Duration) []Worked {
	t.Helper()
	end := h.Now().Add(d)
	done := h.WorkUntilIdle(t)
	for {
		next, ok := h.NextDue(t)
		if !ok || h.Now().Add(next).After(end) {
			h.Advance(end.Sub(h.Now()))
			return append(done, h.WorkUntilIdle(t)...)
		}
		h.Advance(next)
		done = append(done, h.WorkUntilIdle(t)...)
	}
}

func (h *Harness) work(t testing.TB, job *rivertype.JobRow) Worked {
	t.Helper()
	if _, ok := h.funcs[job.Kind]; !ok {
		t.Fatalf("job %d has kind %q, which no worker of the harness works (see AddWorkFunc)", job.ID, job.Kind)
	}
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	res, werr := h.work1(ctx, t, job)
	if res == nil {
		t.Fatalf("working %s job %d: %v", job.Kind, job.ID, werr)
	}
	w := Worked{ID: job.ID, Kind: job.Kind, Args: string(job.EncodedArgs), Event: res.EventKind, Err: werr}
	if res.EventKind == river.EventKindJobFailed && res.Job != nil && res.Job.State == rivertype.JobStateRetryable {
		w.Event = "job_retryable"
	}
	if ctx.Err() != nil {
		t.Fatalf("%s job %d ran out of time (%s): did it block on its own job row?", job.Kind, job.ID, jobTimeout)
	}
	return w
}

// Kinds returns the kinds of ws, in order (for compact assertions).
func Kinds(ws []Worked) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Kind
	}
	return out
}

// Webhooks returns the webhooks the fake GitLab sent and no test has taken
// yet, oldest first, after settling the fake GitLab.
func (h *Harness) Webhooks(t testing.TB) []gitlabfake.SentWebhook {
	t.Helper()
	h.Settle(t)
	h.hooks.mu.Lock()
	defer h.hooks.mu.Unlock()
	return slices.Clone(h.hooks.pending)
}

// TakeWebhooks returns the pending webhooks (see Webhooks) and forgets
// them: a test drops one by not delivering it.
func (h *Harness) TakeWebhooks(t testing.TB) []gitlabfake.SentWebhook {
	t.Helper()
	h.Settle(t)
	h.hooks.mu.Lock()
	defer h.hooks.mu.Unlock()
	out := h.hooks.pending
	h.hooks.pending = nil
	return out
}

// Deliver stores each webhook as the intake does (deduplicated on the
// intake's key, webhooks.GitLabDedupeKey or GitHubDedupeKey, with the job
// that processes it) and reports, per
// webhook, whether it was new. Delivering one twice, or in another order,
// is how a test duplicates or reorders them. The processing jobs run at the
// next WorkUntilIdle.
func (h *Harness) Deliver(t testing.TB, hooks ...gitlabfake.SentWebhook) []bool {
	t.Helper()
	out := make([]bool, len(hooks))
	for i, w := range hooks {
		ev, err := h.decode(w.Event, w.Body)
		if err != nil {
			t.Fatalf("decoding %s: %v", w.Event, err)
		}
		key := webhooks.GitLabDedupeKey(w.IdempotencyKey, w.Event, w.Body)
		if h.GitHub != nil {
			key = webhooks.GitHubDedupeKey(w.IdempotencyKey)
		}
		_, inserted, err := h.Store.InsertDelivery(context.Background(), store.Delivery{
			DedupeKey: key, Event: w.Event, ProjectID: ev.ProjectID, Body: w.Body,
		}, webhooks.ProcessDeliveryJob)
		if err != nil {
			t.Fatalf("storing %s: %v", w.Event, err)
		}
		out[i] = inserted
	}
	return out
}

// DeliverWebhooks takes every pending webhook and delivers it in order; it
// returns them.
func (h *Harness) DeliverWebhooks(t testing.TB) []gitlabfake.SentWebhook {
	t.Helper()
	hooks := h.TakeWebhooks(t)
	h.Deliver(t, hooks...)
	return hooks
}

// decode decodes a webhook as the harness's platform does.
func (h *Harness) decode(event string, body []byte) (platform.HookEvent, error) {
	if h.GitHub != nil {
		return github.DecodeHook(event, body)
	}
	return gitlab.DecodeHook(event, body)
}

// Describe returns one line per webhook (event, object kind, status or
// action), for failure messages; a GitHub webhook is told by its event
// name.
func Describe(hooks []gitlabfake.SentWebhook) string {
	var b strings.Builder
	for _, w := range hooks {
		ev, err := gitlab.DecodeHook(w.Event, w.Body)
		if strings.ToLower(w.Event) == w.Event { // GitHub's event names are lower case
			ev, err = github.DecodeHook(w.Event, w.Body)
		}
		switch {
		case err != nil:
			fmt.Fprintf(&b, "%s (undecodable)\n", w.Event)
		case ev.Pipeline != nil:
			fmt.Fprintf(&b, "%s #%d %s sha %.8s mr !%d\n", w.Event, ev.Pipeline.ID, ev.Pipeline.Status, ev.Pipeline.SHA, ev.Pipeline.MRIID)
		case ev.MergeRequest != nil:
			fmt.Fprintf(&b, "%s !%d %s\n", w.Event, ev.MergeRequest.IID, ev.MergeRequest.Action)
		default:
			fmt.Fprintf(&b, "%s %s\n", w.Event, ev.Kind)
		}
	}
	return b.String()
}
