package guard

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"

	"changebot/store/postgres/pgtest"
)

// TestJobsWork: as worker middleware, Jobs passes a job's result through
// and turns its panic (even http.ErrAbortHandler, which only means
// something to net/http) into the job's error, counted under the job kind
// and logged with the job and the stack.
func TestJobsWork(t *testing.T) {
	t.Parallel()
	errJob := errors.New("job error")
	tests := []struct {
		name      string
		inner     func(context.Context) error
		wantErr   string // "" for nil
		wantCount float64
	}{
		{name: "succeeds", inner: func(context.Context) error { return nil }},
		{name: "fails", inner: func(context.Context) error { return errJob }, wantErr: "job error"},
		{name: "panics", inner: func(context.Context) error { panic("boom") },
			wantErr: "process_delivery: panic: boom", wantCount: 1},
		{name: "panics with ErrAbortHandler", inner: func(context.Context) error { panic(http.ErrAbortHandler) },
			wantErr: "process_delivery: panic: net/http: abort Handler", wantCount: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t)
			job := &rivertype.JobRow{ID: 42, Kind: "process_delivery", Attempt: 2, EncodedArgs: []byte(`{"delivery_id":7}`)}
			err := NewJobs(s.cfg).Work(context.Background(), job, tc.inner)
			if got := errString(err); got != tc.wantErr {
				t.Errorf("Work answered %q, want %q", got, tc.wantErr)
			}
			if got := s.count("process_delivery"); got != tc.wantCount {
				t.Errorf("panics{where=process_delivery} = %v, want %v", got, tc.wantCount)
			}
			logs := s.logs.String()
			if tc.wantCount == 0 {
				if logs != "" {
					t.Errorf("logged %q, want nothing", logs)
				}
				return
			}
			var pe *PanicError
			if !errors.As(err, &pe) {
				t.Errorf("Work answered %v, want it to wrap a *PanicError", err)
			}
			for _, want := range []string{`msg="job panicked"`, "job_id=42", "attempt=2", `job_args="{\"delivery_id\":7}"`,
				"job_kind=process_delivery", "stack=", "guard.TestJobsWork"} {
				if !strings.Contains(logs, want) {
					t.Errorf("log %q lacks %s", logs, want)
				}
			}
		})
	}
}

// TestJobsRun: Run counts under the given where and logs on the given
// logger (the runner's, naming the operation), else on Config.Logger.
func TestJobsRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		withLog  bool
		wantAttr string
	}{
		{name: "own logger", withLog: true, wantAttr: "operation_id=op_1"},
		{name: "guard's logger", wantAttr: `msg="job panicked"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t)
			var log *slog.Logger
			if tc.withLog {
				log = s.cfg.Logger.With("operation_id", "op_1")
			}
			err := NewJobs(s.cfg).Run(context.Background(), log, "create_mr", func(context.Context) error { panic("step bug") })
			if got := errString(err); got != "create_mr: panic: step bug" {
				t.Errorf("Run answered %q", got)
			}
			if got := s.count("create_mr"); got != 1 {
				t.Errorf("panics{where=create_mr} = %v, want 1", got)
			}
			if logs := s.logs.String(); !strings.Contains(logs, tc.wantAttr) || !strings.Contains(logs, "job_kind=create_mr") {
				t.Errorf("log %q lacks %s", logs, tc.wantAttr)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// panicArgs is the job of panicWorker.
type panicArgs struct{}

func (panicArgs) Kind() string { return "guard_test_panic" }

// panicWorker panics in every attempt.
type panicWorker struct {
	river.WorkerDefaults[panicArgs]
}

func (panicWorker) Work(context.Context, *river.Job[panicArgs]) error { panic("worker bug") }

// hourLater retries a failed job an hour later (River makes a job due
// within seconds available at once rather than retryable).
type hourLater struct{}

func (hourLater) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(time.Hour) }

// TestJobsAsRiverMiddleware: installed on a River client, the guard makes
// a worker's panic an ordinary error of the attempt, so River's retry
// policy applies (retryable while attempts are left, then discarded)
// rather than River's own panic handling; each panic is counted.
func TestJobsAsRiverMiddleware(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	tests := []struct {
		name        string
		maxAttempts int
		wantState   rivertype.JobState
	}{
		{name: "attempts left", maxAttempts: 3, wantState: rivertype.JobStateRetryable},
		{name: "last attempt", maxAttempts: 1, wantState: rivertype.JobStateDiscarded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := newSetup(t)
			w := rivertest.NewWorker(t, riverpgxv5.New(db.Pool), &river.Config{Schema: db.Name, RetryPolicy: hourLater{},
				Middleware: []rivertype.Middleware{NewJobs(s.cfg)}}, river.Worker[panicArgs](panicWorker{}))
			tx, err := db.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
			res, err := w.Work(ctx, t, tx, panicArgs{}, &river.InsertOpts{MaxAttempts: tc.maxAttempts})
			var pe *PanicError
			var riverPanic *rivertest.PanicError
			if !errors.As(err, &pe) || errors.As(err, &riverPanic) {
				t.Fatalf("Work answered %v, want the job's error wrapping a *PanicError", err)
			}
			if res.EventKind != river.EventKindJobFailed || res.Job.State != tc.wantState {
				t.Errorf("job %s in state %s, want %s in %s", res.EventKind, res.Job.State, river.EventKindJobFailed, tc.wantState)
			}
			if n := len(res.Job.Errors); n != 1 || res.Job.Errors[0].Error != "guard_test_panic: panic: worker bug" {
				t.Errorf("job errors %+v, want the panic as its error", res.Job.Errors)
			}
			if got := s.count("guard_test_panic"); got != 1 {
				t.Errorf("panics{where=guard_test_panic} = %v, want 1", got)
			}
		})
	}
}
