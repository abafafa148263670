package flows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"changebot/flows/rules"
	"changebot/internal/guard"
	"changebot/platform"
	"changebot/store"
)

// stepFailure is a failure a step recognised: move to Step with Detail.
type stepFailure struct {
	Step   rules.StepCode
	Detail string
}

func (f *stepFailure) Error() string { return fmt.Sprintf("%s: %s", f.Step, f.Detail) }

// failTo returns a recognised failure.
func failTo(step rules.StepCode, format string, args ...any) error {
	return &stepFailure{Step: step, Detail: fmt.Sprintf(format, args...)}
}

// snooze asks the runner to wake the job again after d (waiting is a
// snoozed job, never a sleeping goroutine).
type snooze struct{ d time.Duration }

func (s *snooze) Error() string { return fmt.Sprintf("snooze %s", s.d) }

func snoozeFor(d time.Duration) error { return &snooze{d: d} }

// declaredFailure is the step a job of kind writes at op's step for an
// unexpected error, a panic or exhausted retries (FailureOf in op's flow
// order); 0 when the step's job in op's flow order is not of kind.
func declaredFailure(kind string, op store.Operation) rules.StepCode {
	return rules.FailureOf(kind, rules.StepCode(op.Step), op.ApprovalFirst)
}

// stepFunc does one step of an operation. It returns nil when done, a
// snooze, a *stepFailure, or an error (transient ones are retried).
type stepFunc func(ctx context.Context, op store.Operation) error

// runStep is the boundary of every step job: it loads the operation, drops
// stale jobs, runs the step under the job guard (a panic of the step writes
// the kind's declared failure) and turns every exit into a state or a River
// instruction (STYLE 12, 13).
func (e *Engine) runStep(ctx context.Context, kind string, a OperationArgs, attempt, maxAttempts int, run stepFunc) error {
	op, err := e.st.GetOperation(ctx, e.st.DB(), a.OperationID)
	if errors.Is(err, store.ErrNotFound) {
		e.log.Warn("job for unknown operation", attrOperationID, a.OperationID, attrJobKind, kind)
		return nil
	}
	if err != nil {
		return err
	}
	log := e.opLog(op).With(attrJobKind, kind, attrStep, rules.StepCode(op.Step).String())
	if err := e.ownPlatform(op); err != nil {
		log.Warn("job refused", "err", err)
		return nil
	}
	if op.Step != a.Step {
		log.Debug("stale job: operation moved on", "job_step", rules.StepCode(a.Step).String())
		return nil
	}
	if slices.Contains(rules.StepJobKinds(), kind) && declaredFailure(kind, op) == 0 {
		// A step job, but not the one the step table names for this step
		// (a parked step, or a job enqueued by an older version): nothing
		// to do.
		log.Warn("stale job: the step has no job of this kind")
		return nil
	}
	e.knowPolicy(ctx, op)
	ctx = context.WithValue(ctx, workingKindKey{}, workingJob{kind: kind, attempt: attempt})
	background := slices.Contains(backgroundKinds, kind)
	if background {
		ctx = platform.WithPriority(ctx, platform.PriorityBackground)
	}
	err = e.jobs.Run(ctx, e.opLog(op).With(attrStep, rules.StepCode(op.Step).String()), kind, func(ctx context.Context) error {
		if e.cfg.StepHookFunc != nil {
			e.cfg.StepHookFunc(kind)
		}
		return run(ctx, op)
	})
	var pe *guard.PanicError
	if errors.As(err, &pe) {
		// Counted and logged by the guard; the change ends in a state.
		return e.fail(ctx, op, kind, declaredFailure(kind, op), fmt.Sprintf("internal error (panic): %v", pe.Value))
	}
	var sn *snooze
	var sf *stepFailure
	switch {
	case err == nil:
		return nil
	case errors.As(err, &sn):
		return river.JobSnooze(sn.d)
	case isConflict(err):
		log.Debug("operation moved concurrently", "err", err)
		return nil
	case errors.As(err, &sf):
		e.m.jobFailures.WithLabelValues(kind, "recognised").Inc()
		return e.fail(ctx, op, kind, sf.Step, sf.Detail)
	case errors.Is(err, rules.ErrIllegalTransition):
		// A move the step table refuses is a programming error, never
		// GitLab being down: retrying repeats it. Write the declared
		// failure so a person sees it (issue 9 defect 8).
		e.m.jobFailures.WithLabelValues(kind, "declared").Inc()
		log.Error("step made an illegal move", "err", err)
		return e.fail(ctx, op, kind, declaredFailure(kind, op), err.Error())
	case background && platform.IsBudgetHold(err):
		// A poll the call budget held back yields quietly to work a person
		// waits on (issue 12 point 4): no event, no retry noted. It skips a
		// round: it polls again after the short poll interval, or later
		// when the budget says so, spread over up to a quarter more. (The
		// budget's own wait, the time one call takes to flow back, would
		// bring every held poll back within milliseconds to be held again:
		// database work for nothing.)
		d := max(platform.RetryAfterOf(err), e.pollFor(op).ShortInterval)
		e.m.jobFailures.WithLabelValues(kind, "budget_yield").Inc()
		log.Debug("gitlab call budget low: poll yields", "wait", d)
		return river.JobSnooze(d + time.Duration(rand.Int64N(int64(d/4)+1)))
	case errors.Is(err, platform.ErrRateLimited):
		// A rate limit is GitLab saying "later", never "no": the job
		// snoozes until the account's wait ends (Retry-After,
		// RateLimit-Reset, RateLimit-ResetTime, else a minute), which uses
		// up no attempt, so no change fails because of 429s however long
		// they last (issue 10 point 4).
		d, _ := platform.RateLimitWait(err)
		e.m.jobFailures.WithLabelValues(kind, "rate_limited").Inc()
		log.Info("gitlab rate limit: waiting", "wait", d)
		e.noteDetail(ctx, op, kind, map[string]any{"rate_limited": true, "wait": d.String()},
			fmt.Sprintf("%s rate limit: waiting until %s (%s)", rules.WordsOf(op.Platform).Platform, e.now().Add(d).UTC().Format(time.RFC3339), failureDetail(rules.WordsOf(op.Platform), err)))
		return river.JobSnooze(d)
	case platform.IsTransient(err) && attempt < maxAttempts:
		// 429, 5xx and network errors are never fatal on their own: River
		// retries the job with its backoff, or after the wait GitLab asked
		// for (Retry-After / RateLimit-Reset; a snooze, which does not use
		// up an attempt: a rate limit is GitLab saying "later", not "no").
		e.m.jobFailures.WithLabelValues(kind, "transient").Inc()
		log.Warn("step failed, will retry", "err", err, "attempt", attempt)
		e.noteRetry(ctx, op, kind, attempt, maxAttempts, err)
		if d := platform.RetryAfterOf(err); d > 0 {
			return river.JobSnooze(d)
		}
		return err
	default:
		e.m.jobFailures.WithLabelValues(kind, "declared").Inc()
		log.Error("step failed", "err", err, "attempt", attempt)
		detail := failureDetail(rules.WordsOf(op.Platform), err)
		if platform.IsTransient(err) {
			detail = fmt.Sprintf("gave up after %d attempts: %s", attempt, detail)
		}
		return e.fail(ctx, op, kind, declaredFailure(kind, op), detail)
	}
}

// recordTimeout bounds the writes that record how a job attempt ended
// (its failure step, a retry note).
const recordTimeout = 15 * time.Second

// recordContext returns the context for recording how a job attempt ended:
// ctx's values without its cancellation or deadline, bounded by
// recordTimeout. The job's own context has often expired by then (River's
// JobTimeout, GitLab hanging), and that is exactly when the declared
// failure must still be written (issue 9 defect 3).
func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
}

// fail moves the operation to step with detail, on a fresh bounded context
// (recordContext). It re-reads the operation:
// when the step function moved it before failing, or someone else did, the
// failure belongs to a step that is over and nothing is written. When the
// recognised step is not a legal move from here (a programming error), the
// kind's declared failure step is written instead, so that the change never
// stays "in progress" with no job (DESIGN §2).
func (e *Engine) fail(ctx context.Context, at store.Operation, kind string, step rules.StepCode, detail string) error {
	ctx, cancel := recordContext(ctx)
	defer cancel()
	op, err := e.st.GetOperation(ctx, e.st.DB(), at.ID)
	if err != nil {
		return err
	}
	from := rules.StepCode(op.Step)
	if op.Step != at.Step || from == step {
		return nil // moved on, or already there (a parked step's job failed again)
	}
	if step == 0 || !rules.CanMove(from, step) {
		declared := declaredFailure(kind, op)
		e.opLog(op).Error("recognised failure is not a legal move; writing the declared failure",
			attrJobKind, kind, "to", step.String(), "declared", declared.String(), "detail", detail)
		if declared == from {
			return nil
		}
		if declared == 0 || !rules.CanMove(from, declared) {
			return fmt.Errorf("recording failure of %s job at %s: %s -> %s: %w", kind, from, from, declared, rules.ErrIllegalTransition)
		}
		step = declared
	}
	_, err = e.Transition(ctx, op, step, TransitionOpts{Source: "job:" + kind,
		Payload: map[string]any{"detail": detail},
		Update:  func(o *store.Operation) { o.Detail = detail }})
	if isConflict(err) {
		return nil
	}
	return err
}

// backgroundKinds are the job kinds whose GitLab calls are polls of a
// wait: they take from the account's call budget at
// platform.PriorityBackground and yield while it runs low (issue 12 point
// 4). Every other job (create, handle: approvals and merges, the status
// note) is work a person waits on.
var backgroundKinds = []string{rules.KindAwaitPipeline, rules.KindAwaitDeploy}

// stepWorker adapts a stepFunc to a River worker.
type stepWorker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	e    *Engine
	kind string
	args func(T) OperationArgs
	run  stepFunc
}

// Work implements river.Worker.
func (w *stepWorker[T]) Work(ctx context.Context, job *river.Job[T]) error {
	return w.e.runStep(ctx, w.kind, w.args(job.Args), job.Attempt, job.MaxAttempts, w.run)
}

// AddWorkers registers every job worker of the flow on workers.
func (e *Engine) AddWorkers(workers *river.Workers) { e.registerWorkers(workerSink{workers: workers}) }

// JobWorkFunc works one job row the way its registered River worker does:
// it decodes the row's args and calls the worker's Work. The row carries the
// attempt counters the step runner reads.
type JobWorkFunc func(ctx context.Context, job *rivertype.JobRow) error

// WorkFuncs returns, by job kind, the workers AddWorkers registers, as
// JobWorkFuncs. It exists for the in-process test harness (flows/flowtest),
// which lists due jobs itself and works them through rivertest with an
// injected clock, without a running River client.
func (e *Engine) WorkFuncs() map[string]JobWorkFunc {
	s := workerSink{funcs: map[string]JobWorkFunc{}}
	e.registerWorkers(s)
	return s.funcs
}

// WorkFuncOf returns w as a JobWorkFunc (see WorkFuncs).
func WorkFuncOf[T river.JobArgs](w river.Worker[T]) JobWorkFunc {
	return func(ctx context.Context, row *rivertype.JobRow) error {
		job := &river.Job[T]{JobRow: row}
		if err := json.Unmarshal(row.EncodedArgs, &job.Args); err != nil {
			return fmt.Errorf("decoding %s job %d: %w", row.Kind, row.ID, err)
		}
		return w.Work(ctx, job)
	}
}

// workerSink receives the flow's workers: on River's registry, as
// JobWorkFuncs, or both.
type workerSink struct {
	workers *river.Workers
	funcs   map[string]JobWorkFunc
}

func addWorker[T river.JobArgs](s workerSink, w river.Worker[T]) {
	if s.workers != nil {
		river.AddWorker(s.workers, w)
	}
	if s.funcs != nil {
		var args T
		s.funcs[args.Kind()] = WorkFuncOf(w)
	}
}

// registerWorkers is the one list of the flow's job workers.
func (e *Engine) registerWorkers(s workerSink) {
	addWorker(s, &stepWorker[RequestApprovalArgs]{e: e, kind: rules.KindRequestApproval,
		args: func(a RequestApprovalArgs) OperationArgs { return OperationArgs(a) }, run: e.requestApproval})
	addWorker(s, &stepWorker[CreateMRArgs]{e: e, kind: rules.KindCreateMR,
		args: func(a CreateMRArgs) OperationArgs { return OperationArgs(a) }, run: e.createWorker().createMR})
	addWorker(s, &stepWorker[AwaitPipelineArgs]{e: e, kind: rules.KindAwaitPipeline,
		args: func(a AwaitPipelineArgs) OperationArgs { return OperationArgs(a) }, run: e.pipelineWorker().awaitPipeline})
	addWorker(s, &stepWorker[HandleArgs]{e: e, kind: rules.KindHandle,
		args: func(a HandleArgs) OperationArgs { return OperationArgs(a) }, run: e.handleWorker().handle})
	addWorker(s, &stepWorker[AwaitDeployArgs]{e: e, kind: rules.KindAwaitDeploy,
		args: func(a AwaitDeployArgs) OperationArgs { return OperationArgs(a) }, run: e.deployWorker().awaitDeploy})
	addWorker(s, &noteWorker{e: e})
	addWorker(s, &cancelCleanupWorker{e: e})
}

// MaxAttempts is the attempt budget of step jobs. With RetryPolicy
// (doubling from 1 s, capped at 2 minutes) 25 attempts ride out about two
// hours of GitLab 5xx before the step's declared failure.
const MaxAttempts = 25

// RetryPolicy is the River retry policy of the flow's jobs: exponential
// from 1 s, doubling per attempt, capped at Max (default 2 minutes), with
// up to 10% jitter, so a change resumes within minutes once GitLab recovers
// (River's default, attempt^4 seconds, would wait up to hours).
type RetryPolicy struct{ Max time.Duration }

// NextRetry implements river.ClientRetryPolicy.
func (p RetryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	limit := p.Max
	if limit <= 0 {
		limit = 2 * time.Minute
	}
	d := limit
	if n := job.Attempt - 1; n < 30 {
		d = min(time.Second<<max(n, 0), limit)
	}
	d += time.Duration(rand.Int64N(int64(d/10) + 1))
	return time.Now().Add(d)
}

// noteRetry makes a transient failure visible on the change while it is
// retried (detail and an attempt event, with compare-and-set on the
// version): without it a GitLab outage would look like "keep waiting".
func (e *Engine) noteRetry(ctx context.Context, op store.Operation, kind string, attempt, maxAttempts int, err error) {
	detail := fmt.Sprintf("retrying (attempt %d of %d): %s", attempt, maxAttempts, failureDetail(rules.WordsOf(op.Platform), err))
	e.noteDetail(ctx, op, kind, map[string]any{"attempt": attempt}, detail)
}

// noteDetail records detail on the change (its detail and an attempt
// event with payload and detail), with compare-and-set on the version.
func (e *Engine) noteDetail(ctx context.Context, op store.Operation, kind string, payload map[string]any, detail string) {
	payload["detail"] = detail
	ctx, cancel := recordContext(ctx)
	defer cancel()
	_, werr := e.recordInStep(ctx, op, "job:"+kind, payload, func(o *store.Operation) { o.Detail = detail }, nil)
	if werr != nil && !isConflict(werr) {
		e.opLog(op).Warn("recording the retry failed", "err", werr)
	}
}

// workingKindKey is the context key of the step job being worked
// (runStep): a workingJob.
type workingKindKey struct{}

// workingJob is the step job a context works: its kind and River's attempt
// number (1 on its first run and after a snooze, more after a failed or
// rescued run: a replica killed in the middle of it).
type workingJob struct {
	kind    string
	attempt int
}

// workingKind returns the kind of the step job ctx works, "" outside one.
func workingKind(ctx context.Context) string {
	j, _ := ctx.Value(workingKindKey{}).(workingJob)
	return j.kind
}

// repeatedRun reports whether ctx works a step job that ran before and
// did not finish (River's attempt above 1): whatever that run did on the
// platform may have happened.
func repeatedRun(ctx context.Context) bool {
	j, _ := ctx.Value(workingKindKey{}).(workingJob)
	return j.attempt > 1
}
