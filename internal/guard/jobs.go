package guard

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Jobs is the job panic guard: as River worker middleware (Work) it runs
// around every job of the client it is installed on, and the flow runner
// calls Run around a step to write the step's declared failure. A panic
// becomes the job's error, wrapping a *PanicError ("<kind>: panic: <value>"),
// so River's retry policy and discard apply; it is counted under the job
// kind and logged with its stack.
type Jobs struct {
	river.MiddlewareDefaults
	cfg Config
	log *slog.Logger
}

var _ rivertype.WorkerMiddleware = (*Jobs)(nil)

// NewJobs returns the job guard of cfg. Install it as the River client's
// first Middleware (river.Config.Middleware), so that it is outermost.
func NewJobs(cfg Config) *Jobs { return &Jobs{cfg: cfg, log: cfg.logger()} }

// Work implements rivertype.WorkerMiddleware: doInner's panic becomes the
// job's error, logged with the job's id, kind, attempt and args (small
// JSON structs of ids, STYLE 26).
func (g *Jobs) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	return g.run(ctx, job.Kind, doInner, func() *slog.Logger {
		return g.log.With(attrJobID, job.ID, attrAttempt, job.Attempt, attrJobArgs, string(job.EncodedArgs))
	})
}

// Run calls f with ctx; a panic of f is counted under where (a job kind),
// logged on log (the logger naming the work; nil: Config.Logger) and
// returned as an error wrapping its *PanicError. Any other error of f is
// returned as it is.
func (g *Jobs) Run(ctx context.Context, log *slog.Logger, where string, f func(context.Context) error) error {
	return g.run(ctx, where, f, func() *slog.Logger {
		if log == nil {
			return g.log
		}
		return log
	})
}

func (g *Jobs) run(ctx context.Context, where string, f func(context.Context) error, log func() *slog.Logger) error {
	err := Call(func() error { return f(ctx) })
	pe, ok := Panicked(err)
	if !ok {
		return err
	}
	g.cfg.count(where)
	log().ErrorContext(ctx, "job panicked", attrJobKind, where, attrPanic, fmt.Sprint(pe.Value), attrStack, string(pe.Stack))
	return fmt.Errorf("%s: %w", where, pe)
}
