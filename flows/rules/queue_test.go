package rules

import (
	"testing"
	"time"
)

// TestQueueETA: the estimate is the turns ahead plus the change's own,
// rounded up to the minute; nothing while no turn has ended.
func TestQueueETA(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ahead int
		avg   time.Duration
		want  string
	}{
		{0, 0, ""},
		{5, 0, ""},
		{0, 20 * time.Second, "under a minute"},
		{2, 20 * time.Second, "about 1 min"},
		{2, 40 * time.Second, "about 2 min"},
		{199, 1500 * time.Millisecond, "about 5 min"},
		{-1, time.Minute, ""},
	}
	for _, tc := range tests {
		if got := QueueETA(tc.ahead, tc.avg); got != tc.want {
			t.Errorf("QueueETA(%d, %v) = %q, want %q", tc.ahead, tc.avg, got, tc.want)
		}
	}
}
