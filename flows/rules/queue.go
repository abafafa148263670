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

// The values of queue.defer_ci (DeferCIModes).
const (
	// DeferCIAuto defers where the merge method needs an up-to-date merge
	// request and merges with a merge commit (GitLab rebase_merge): there
	// the head is rebased and tested again anyway, so a pipeline before
	// the head is one too many.
	DeferCIAuto = "auto"
	// DeferCIOn defers wherever the change waits in a merge queue.
	DeferCIOn = "on"
	// DeferCIOff runs a change's first pipeline when its merge request is
	// opened, as without a queue.
	DeferCIOff = "off"
)

// DeferCIModes are the values of queue.defer_ci.
var DeferCIModes = []string{DeferCIAuto, DeferCIOn, DeferCIOff}

// DefersCI reports whether a change's first pipeline waits until the
// change reaches the head of its merge queue (issue 22 point 2,
// queue.defer_ci mode), so that a queued change costs one pipeline
// instead of two. It applies on GitLab only, to a change that waits in a
// queue (queued: NeedsQueue) of a project without merge trains (a train
// runs its own pipeline on every car, and GitLab adds only a merge request
// whose pipeline passed); auto needs merge method ff or rebase_merge. On
// GitHub the first checks always run: a workflow run skipped by a commit
// message cannot be started again for the same head through the API.
//
// Never under merge method ff, whatever the mode: a fast-forward puts the
// change's own commit, [skip ci] in its message, at the head of the target
// branch, and GitLab would skip the target branch's pipeline too, the
// deploy that confirms the change. rebase_merge and merge put a merge
// commit there, whose message is the merge request's.
func DefersCI(mode, platform, mergeMethod string, queued, mergeTrains bool) bool {
	if WordsOf(platform).OnGitHub() || !queued || mergeTrains || mergeMethod == "ff" {
		return false
	}
	switch mode {
	case DeferCIOff:
		return false
	case DeferCIOn:
		return true
	}
	return mergeMethod == "rebase_merge"
}

// SkipCIMarker is the line a deferred change's commit message carries so
// that GitLab creates no running pipeline for it (a pipeline of status
// skipped): GitLab skips a pipeline whose commit message matches
// /\[(ci[ _-]skip|skip[ _-]ci)\]/i, for pushes, merge request pipelines
// and rebases alike, except pipelines created through POST
// /projects/:id/pipeline, triggers, schedules and the web form, which
// ignore it (lib/gitlab/ci/pipeline/chain/skip.rb, doc/ci/pipelines
// "Skip a pipeline"). So the head's pipeline of a deferred change is
// created through POST /projects/:id/pipeline.
const SkipCIMarker = "[skip ci] changebot runs this change's pipeline when it reaches the head of the merge queue"
