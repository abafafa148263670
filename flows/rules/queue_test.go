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

func TestDefersCI(t *testing.T) {
	for _, c := range []struct {
		name                string
		mode, plat, method  string
		queued, mergeTrains bool
		want                bool
	}{
		{"auto, rebase_merge, queued", DeferCIAuto, PlatformGitLab, "rebase_merge", true, false, true},
		{"empty mode is auto", "", PlatformGitLab, "rebase_merge", true, false, true},
		{"auto, ff: the marker would skip the target's deploy", DeferCIAuto, PlatformGitLab, "ff", true, false, false},
		{"on, ff: the marker would skip the target's deploy", DeferCIOn, PlatformGitLab, "ff", true, false, false},
		{"auto, merge method merge (queue.mode on)", DeferCIAuto, PlatformGitLab, "merge", true, false, false},
		{"on, merge method merge (queue.mode on)", DeferCIOn, PlatformGitLab, "merge", true, false, true},
		{"off", DeferCIOff, PlatformGitLab, "rebase_merge", true, false, false},
		{"not queued (queue.mode off)", DeferCIOn, PlatformGitLab, "rebase_merge", false, false, false},
		{"merge trains run their own pipelines", DeferCIOn, PlatformGitLab, "rebase_merge", true, true, false},
		{"GitHub never", DeferCIOn, PlatformGitHub, "", true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := DefersCI(c.mode, c.plat, c.method, c.queued, c.mergeTrains); got != c.want {
				t.Errorf("DefersCI = %v, want %v", got, c.want)
			}
		})
	}
}
