package guard

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// logBuffer keeps what a test's logger wrote and passes it to t.Log.
type logBuffer struct {
	t   testing.TB
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.t.Log(strings.TrimSpace(string(p)))
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// setup is the shared fixture: a guard Config counting in its own counter
// and logging to a buffer.
type setup struct {
	cfg  Config
	logs *logBuffer
}

func newSetup(t testing.TB) setup {
	logs := &logBuffer{t: t}
	return setup{logs: logs, cfg: Config{
		Panics: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "changebot_panics_total"}, []string{"where"}),
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	}}
}

func (s setup) count(where string) float64 {
	return testutil.ToFloat64(s.cfg.Panics.WithLabelValues(where))
}

func TestCall(t *testing.T) {
	t.Parallel()
	errOwn := errors.New("own error")
	tests := []struct {
		name      string
		f         func() error
		wantPanic any // nil: no panic
		wantIs    error
	}{
		{name: "returns nil", f: func() error { return nil }},
		{name: "returns an error", f: func() error { return errOwn }, wantIs: errOwn},
		{name: "returns a wrapped panic error", f: func() error { return errors.Join(&PanicError{Value: "deeper"}) }},
		{name: "panics with a string", f: func() error { panic("boom") }, wantPanic: "boom"},
		{name: "panics with an error", f: func() error { panic(io.EOF) }, wantPanic: io.EOF, wantIs: io.EOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Call(tc.f)
			pe, panicked := Panicked(err)
			if panicked != (tc.wantPanic != nil) {
				t.Fatalf("Call answered %v, panicked %v; want panicked %v", err, panicked, tc.wantPanic != nil)
			}
			if panicked && (pe.Value != tc.wantPanic || !strings.Contains(string(pe.Stack), "guard.TestCall")) {
				t.Errorf("panic error %v with stack %q, want the value %v and the panicking stack", pe.Value, pe.Stack, tc.wantPanic)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("Call answered %v, want an error that is %v", err, tc.wantIs)
			}
		})
	}
}
