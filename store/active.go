package store

import (
	"time"
)

// ActiveStatuses lists the binding statuses of changes that hold their
// binding (every status but the reappliable ones), in flow order.
func ActiveStatuses() []string {
	out := make([]string, 0, len(AllStatuses))
	for _, st := range AllStatuses {
		if !Reappliable[st] {
			out = append(out, st)
		}
	}
	return out
}

// StatusAge is how many operations are in Status, and when the least
// recently changed of them last changed (zero when Count is 0).
type StatusAge struct {
	Status          string
	Count           int
	OldestUpdatedAt time.Time
}
