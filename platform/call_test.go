package platform

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		value     string
		want      time.Duration
		wantNamed bool
	}{
		{"absent", "", 0, false},
		{"seconds", "60", time.Minute, true},
		{"seconds with spaces", " 7 ", 7 * time.Second, true},
		{"negative seconds", "-1", 0, false},
		{"HTTP date ahead", "Mon, 02 Mar 2026 09:01:30 GMT", 90 * time.Second, true},
		{"HTTP date passed", "Mon, 02 Mar 2026 08:59:00 GMT", 0, true},
		{"unparsable", "soon", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.value != "" {
				h.Set("Retry-After", tc.value)
			}
			got, named := RetryAfterHeader(h, now)
			if got != tc.want || named != tc.wantNamed {
				t.Errorf("RetryAfterHeader(%q) = %v, %v; want %v, %v", tc.value, got, named, tc.want, tc.wantNamed)
			}
		})
	}
}

func TestBackoffBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		attempt  int
		min, max time.Duration
	}{
		{0, 50 * time.Millisecond, 100 * time.Millisecond},
		{1, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 400 * time.Millisecond, 800 * time.Millisecond},
		{10, time.Second, 2 * time.Second}, // capped at waitMax
	}
	for _, tc := range tests {
		for range 50 {
			if d := Backoff(100*time.Millisecond, 2*time.Second, tc.attempt); d < tc.min || d > tc.max {
				t.Fatalf("Backoff(attempt %d) = %v, want within [%v, %v]", tc.attempt, d, tc.min, tc.max)
			}
		}
	}
	if d := Backoff(0, 0, 3); d != 0 {
		t.Errorf("Backoff with zero bounds = %v, want 0", d)
	}
}

func TestUnsentRetryable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"dial refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"DNS timeout", &net.DNSError{Err: "timeout", IsTimeout: true}, true},
		{"no such host", &net.DNSError{Err: "no such host", IsNotFound: true}, false},
		{"no such host inside a dial error", &net.OpError{Op: "dial", Err: &net.DNSError{IsNotFound: true}}, false},
		{"read reset (may have been processed)", &net.OpError{Op: "read", Err: errors.New("reset")}, false},
		{"other", context.DeadlineExceeded, false},
	}
	for _, tc := range tests {
		if got := UnsentRetryable(tc.err); got != tc.want {
			t.Errorf("%s: UnsentRetryable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAPIPath(t *testing.T) {
	t.Parallel()
	tests := []struct{ url, base, want string }{
		{"https://ghe.example/api/v3/repos/o/r/pulls/7/merge", "/api/v3/", "/repos/o/r/pulls/7/merge"},
		{"https://gl.example/api/v4/projects/g%2Fr/merge_requests/7", "/api/v4", "/projects/g%2Fr/merge_requests/7"},
		{"https://api.github.com/repos/o/r", "/", "/repos/o/r"},
		{"https://gl.example/other/path", "/api/v4", "/other/path"},
	}
	for _, tc := range tests {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := APIPath(u, tc.base); got != tc.want {
			t.Errorf("APIPath(%s, %q) = %q, want %q", tc.url, tc.base, got, tc.want)
		}
	}
}

type fakeWaits struct {
	until time.Time
	err   error
}

func (f fakeWaits) AccountBlockedUntil(context.Context, string) (time.Time, error) {
	return f.until, f.err
}
func (f fakeWaits) BlockAccountUntil(context.Context, string, time.Time) error { return nil }

func TestWaitUntil(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	tests := []struct {
		name    string
		waits   AccountWaits
		want    time.Time
		wantErr bool
	}{
		{"no waits configured", nil, time.Time{}, false},
		{"waiting", fakeWaits{until: now.Add(time.Minute)}, now.Add(time.Minute), false},
		{"wait over", fakeWaits{until: now}, time.Time{}, false},
		{"read failed: send", fakeWaits{err: errors.New("db down")}, time.Time{}, true},
	}
	for _, tc := range tests {
		got, err := WaitUntil(context.Background(), tc.waits, "acct", clock)
		if !got.Equal(tc.want) || (err != nil) != tc.wantErr {
			t.Errorf("%s: WaitUntil = %v, %v; want %v, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}
