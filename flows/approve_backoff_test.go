package flows

import (
	"testing"
	"time"
)

// TestApproveBackoffGrows pins the per-reviewer approve backoff (DESIGN §5:
// "on error retry with exponential backoff"): each wait doubles from the
// short interval and stops at the long one. The end-to-end failure test only
// checks the outcome; the schedule is this rule's.
func TestApproveBackoffGrows(t *testing.T) {
	t.Parallel()
	p := PollConfig{ShortInterval: 15 * time.Second, LongInterval: 2 * time.Minute}
	tests := []struct {
		failures int
		want     time.Duration
	}{
		{1, 15 * time.Second},
		{2, 30 * time.Second},
		{3, time.Minute},
		{4, 2 * time.Minute},
		{5, 2 * time.Minute},
		{50, 2 * time.Minute},
	}
	backoff := approveBackoff(p)
	for _, tc := range tests {
		if got := backoff(tc.failures); got != tc.want {
			t.Errorf("wait after %d failures = %s, want %s", tc.failures, got, tc.want)
		}
	}
	if got := approveBackoff(PollConfig{ShortInterval: time.Minute, LongInterval: time.Second})(3); got != time.Minute {
		t.Errorf("a long interval below the short one: wait %s, want the short interval", got)
	}
}
