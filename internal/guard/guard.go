// Package guard owns the two places where changebot recovers a panic
// (STYLE 13): Call, under every job (Jobs, the River worker middleware, and
// the flow runner's step) and every other function whose panic must become
// its error, and HTTP, the middleware around the router that every HTTP
// handler sits behind. A recovered panic becomes an error: the job's (River
// retries or discards it) or a 500 answer; the boundaries count it in
// changebot_panics_total{where} and log it with its stack.
//
// It holds no rules of the bot: it knows neither flows, stores nor
// platforms, and no other package recovers a panic.
package guard

import (
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// WhereHTTP is the where label of changebot_panics_total for a panic of an
// HTTP handler (HTTP counts every one under it); a job's panic counts
// under its job kind.
const WhereHTTP = "http"

// Log attribute keys (STYLE 9).
const (
	attrWhere   = "where"
	attrPanic   = "panic"
	attrStack   = "stack"
	attrJobID   = "job_id"
	attrJobKind = "job_kind"
	attrJobArgs = "job_args"
	attrAttempt = "attempt"
	attrMethod  = "method"
	attrPath    = "path"
)

// Config configures the guards (NewJobs, HTTP).
type Config struct {
	// Panics counts recovered panics by label "where": the job kind, or
	// WhereHTTP (changebot_panics_total, flows.Metrics.PanicCounter). Nil
	// counts nothing.
	Panics *prometheus.CounterVec
	// Logger logs each recovered panic with its stack; nil logs nothing.
	Logger *slog.Logger
}

func (c Config) count(where string) {
	if c.Panics != nil {
		c.Panics.WithLabelValues(where).Inc()
	}
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// PanicError is the error a recovered panic becomes: Value is what was
// passed to panic, Stack the panicking goroutine's stack at the recovery.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Unwrap returns Value when it is an error (errors.Is(err, io.EOF) holds
// for a panic(io.EOF)), else nil.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Call calls f and returns its error; when f panics it returns the
// *PanicError itself (not wrapped, so a caller tells f's panic from an
// error f returned with a type assertion, see Panicked). It neither counts
// nor logs: Jobs does, for a job.
func Call(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return f()
}

// Panicked returns the *PanicError Call returned for a panic of its own
// function; false for any other error, a wrapped *PanicError included (a
// panic recovered further down, already an error of that call).
func Panicked(err error) (*PanicError, bool) {
	pe, ok := err.(*PanicError) //nolint:errorlint // Call returns it unwrapped; a wrapped one is an error of f
	return pe, ok
}
