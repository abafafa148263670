package rules

import (
	"fmt"
	"time"
)

// Merge queue modes (setting queue.mode, issue 22 point 7).
const (
	// QueueAuto queues where the platform merges only an up-to-date merge
	// request: GitLab's merge methods ff and rebase_merge (the project's
	// merge_method), and on GitHub every branch (whether a branch's
	// required checks are strict is readable only with administration
	// rights; queue.mode off merges a branch's pull requests in parallel).
	QueueAuto = "auto"
	// QueueOn queues every change of the project.
	QueueOn = "on"
	// QueueOff merges changes in parallel, each rebasing when the
	// platform asks (the behaviour before merge queues).
	QueueOff = "off"
)

// QueueModes are the values of queue.mode.
var QueueModes = []string{QueueAuto, QueueOn, QueueOff}

// NeedsQueue reports whether a change whose project has GitLab merge
// method mergeMethod ("" when unknown or not GitLab) waits in its branch's
// merge queue under mode, on platform.
func NeedsQueue(mode, platform, mergeMethod string) bool {
	switch mode {
	case QueueOn:
		return true
	case QueueOff:
		return false
	}
	if WordsOf(platform).OnGitHub() {
		return true
	}
	return mergeMethod == "ff" || mergeMethod == "rebase_merge"
}

// headSteps are the steps of a change at the head of its merge queue: it
// is approved (HANDLE_STARTED again after a rebase), merging, rebasing or
// waiting for the pipeline of its new head. A move out of them gives the
// head back (flows.Engine.Transition), so the next change moves up at once:
// merged, failed, parked in a pending step, a draft, closed or cancelled.
var headSteps = map[StepCode]bool{HandleStarted: true, HandleApproved: true, HandleRebasing: true, HandleAwaitPipeline: true}

// HoldsQueueHead reports whether a change at step may hold the head of its
// merge queue.
func HoldsQueueHead(step StepCode) bool { return headSteps[step] }

// QueuePlace is how a waiting change's place reads: "1st", "2nd", "3rd",
// "11th", "22nd".
func QueuePlace(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// QueueETA says, for a status comment, about when a change with ahead
// changes before it in its merge queue (the head included) gets merged,
// when the queue's heads took avg each on average (store.Queue.TurnAvg):
// its own turn after theirs, ahead+1 turns, rounded up to the minute
// ("about 2 min"); "under a minute" below one; "" while no turn has ended
// (avg 0), since nothing is known yet.
func QueueETA(ahead int, avg time.Duration) string {
	if avg <= 0 || ahead < 0 {
		return ""
	}
	eta := time.Duration(ahead+1) * avg
	if eta < time.Minute {
		return "under a minute"
	}
	return fmt.Sprintf("about %d min", int((eta+time.Minute-1)/time.Minute))
}

// QueueRefreshPlaces is how close to the head a waiting change says where
// it stands each time it looks (its place and the changes ahead of it);
// farther back it keeps what it said when it joined, so that a long queue
// costs no write per change per turn.
const QueueRefreshPlaces = 3
