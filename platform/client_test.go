package platform

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestUserOnceSharesTheFirstRead: callers that arrive while the first read
// is in flight get its answer without reading; a failed read is not kept.
func TestUserOnceSharesTheFirstRead(t *testing.T) {
	t.Parallel()
	var o UserOnce
	var reads atomic.Int32
	release := make(chan struct{})
	read := func(context.Context) (User, error) {
		reads.Add(1)
		<-release
		return User{ID: 7, Username: "robot"}, nil
	}
	const callers = 8
	var wg sync.WaitGroup
	got := make([]User, callers)
	started := make(chan struct{}, callers)
	for i := range callers {
		wg.Go(func() {
			started <- struct{}{}
			u, err := o.Get(context.Background(), read)
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
			got[i] = u
		})
	}
	for range callers {
		<-started
	}
	close(release)
	wg.Wait()
	if n := reads.Load(); n != 1 {
		// Callers that had not reached Get before the read ended find it cached: still one read.
		t.Errorf("reads = %d, want 1", n)
	}
	for i, u := range got {
		if u.ID != 7 {
			t.Errorf("caller %d got %+v", i, u)
		}
	}

	var failing UserOnce
	boom := errors.New("boom")
	if _, err := failing.Get(context.Background(), func(context.Context) (User, error) { return User{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("first read: %v, want boom", err)
	}
	u, err := failing.Get(context.Background(), func(context.Context) (User, error) { return User{ID: 1}, nil })
	if err != nil || u.ID != 1 {
		t.Errorf("after a failed read: %+v, %v; want a new read", u, err)
	}
}

func TestParseBaseURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ raw, wantErr string }{
		{"https://gitlab.example/prefix", ""},
		{"http://127.0.0.1:8080", ""},
		{"ftp://gitlab.example", "scheme must be http or https"},
		{"https://", "host is empty"},
		{"https://user:hunter2@gitlab.example", "must not carry user info"},
		{"https://gitlab.example/?x=1", "must not carry user info, query or fragment"},
		{"https://gitlab.example/#top", "must not carry user info, query or fragment"},
		{"https://gitlab.example/%zz", "parsing base URL"},
	}
	for _, tc := range tests {
		_, err := ParseBaseURL(tc.raw)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("ParseBaseURL(%q): %v", tc.raw, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ParseBaseURL(%q) = %v, want an error with %q", tc.raw, err, tc.wantErr)
		case err != nil && strings.Contains(err.Error(), "hunter2"):
			t.Errorf("ParseBaseURL(%q) error shows the password: %v", tc.raw, err)
		}
	}
}

func TestRedactError(t *testing.T) {
	t.Parallel()
	secrets := []string{"", "tok-123"}
	plain := errors.New("no secret here")
	if got := RedactError(plain, secrets); got != plain { //nolint:errorlint // the same value, not a wrapped one, is the contract
		t.Errorf("an error without a secret was replaced: %v", got)
	}
	got := RedactError(errors.New("GET /x?private_token=tok-123: 401"), secrets)
	if got == nil || strings.Contains(got.Error(), "tok-123") || !strings.Contains(got.Error(), "[REDACTED]") {
		t.Errorf("RedactError = %v, want the token replaced", got)
	}
	if RedactError(nil, secrets) != nil {
		t.Error("RedactError(nil) is not nil")
	}
}

func TestRetryLimitsWithDefaults(t *testing.T) {
	t.Parallel()
	def := RetryLimits{Max: 2, WaitMin: 100 * time.Millisecond, WaitMax: 2 * time.Second}
	tests := []struct {
		name string
		in   RetryLimits
		want RetryLimits
	}{
		{"zero takes the defaults", RetryLimits{}, def},
		{"negative Max stays: no retries", RetryLimits{Max: -1}, RetryLimits{Max: -1, WaitMin: def.WaitMin, WaitMax: def.WaitMax}},
		{"WaitMax below WaitMin is raised", RetryLimits{Max: 1, WaitMin: 5 * time.Second, WaitMax: time.Second}, RetryLimits{Max: 1, WaitMin: 5 * time.Second, WaitMax: 5 * time.Second}},
		{"WaitMin above the default WaitMax", RetryLimits{WaitMin: 3 * time.Second}, RetryLimits{Max: 2, WaitMin: 3 * time.Second, WaitMax: 3 * time.Second}},
	}
	for _, tc := range tests {
		if got := tc.in.WithDefaults(def); got != tc.want {
			t.Errorf("%s: %+v.WithDefaults = %+v, want %+v", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestAccountsReviewer(t *testing.T) {
	t.Parallel()
	a := NewAccounts(2)
	var reads atomic.Int32
	read := func(_ context.Context, i int) (User, error) {
		reads.Add(1)
		if i == 1 {
			return User{}, errors.New("401")
		}
		return User{ID: int64(100 + i)}, nil
	}
	tests := []struct {
		i       int
		wantID  int64
		wantErr string
	}{
		{0, 100, ""},
		{0, 100, ""}, // cached: no second read
		{1, 0, "reading reviewer 1: 401"},
		{2, 0, "reading reviewer 2: only 2 reviewers configured"},
		{-1, 0, "reading reviewer -1: only 2 reviewers configured"},
	}
	for _, tc := range tests {
		u, err := a.Reviewer(context.Background(), tc.i, read)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("Reviewer(%d) error %v, want %q", tc.i, err, tc.wantErr)
			}
			continue
		}
		if err != nil || u.ID != tc.wantID {
			t.Errorf("Reviewer(%d) = %+v, %v; want id %d", tc.i, u, err, tc.wantID)
		}
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("reads = %d, want 2 (reviewer 0 once, reviewer 1 once)", n)
	}
	if _, err := a.Robot(context.Background(), func(context.Context) (User, error) { return User{}, errors.New("down") }); err == nil ||
		err.Error() != "reading robot user: down" {
		t.Errorf("Robot error %v, want %q", err, "reading robot user: down")
	}
}
