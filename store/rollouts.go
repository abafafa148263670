package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// MaxRolloutIDChars bounds a rollout id, in characters (the API's limit,
// as for subject_id).
const MaxRolloutIDChars = 255

// RolloutCount is one group of a rollout's aggregate: Count changes of
// the rollout in project ProjectID (Project, its path) at step Step
// (binding status Status), the first of them created at FirstCreatedAt and
// the last updated at LastUpdatedAt (UTC).
type RolloutCount struct {
	ProjectID      int64
	Project        string
	Status         string
	Step           int
	Count          int
	FirstCreatedAt time.Time
	LastUpdatedAt  time.Time
}

// Rollout is the progress of the changes submitted with one rollout_id
// (issue 25 point 3), as one read sees it: the aggregate by project,
// status and step (Counts; one SQL statement, never a read per change)
// and the changes the read was asked to list (Listed, RolloutReadParams).
// The store does not know which steps matter: the caller says.
type Rollout struct {
	ID     string
	Counts []RolloutCount
	// Listed are up to the asked limit of the rollout's changes at the
	// asked steps: those of the first group of steps, oldest update first,
	// then those of the next group, and so on.
	Listed []Operation
}

// Total is the number of the rollout's changes.
func (r Rollout) Total() int {
	n := 0
	for _, c := range r.Counts {
		n += c.Count
	}
	return n
}

// FirstCreatedAt is when the rollout's first change was submitted; zero
// for a rollout without changes.
func (r Rollout) FirstCreatedAt() time.Time {
	var t time.Time
	for _, c := range r.Counts {
		if t.IsZero() || c.FirstCreatedAt.Before(t) {
			t = c.FirstCreatedAt
		}
	}
	return t
}

// LastUpdatedAt is when one of the rollout's changes last moved or was
// written; zero for a rollout without changes.
func (r Rollout) LastUpdatedAt() time.Time {
	var t time.Time
	for _, c := range r.Counts {
		if c.LastUpdatedAt.After(t) {
			t = c.LastUpdatedAt
		}
	}
	return t
}

// RolloutReadParams select a rollout (ID) and the changes of it to list:
// those at one of the steps of Lists, group by group (one statement per
// group that the limit still leaves room for), at most ListLimit in all
// (none when Lists is empty or ListLimit 0).
type RolloutReadParams struct {
	ID        string
	Lists     [][]int
	ListLimit int
}

// RolloutMark is the notification state of a rollout (table rollouts):
// State is the state its last summary told ("" before the first) and
// Notices how many summaries it has sent, the sequence of their delivery
// keys.
type RolloutMark struct {
	State   string
	Notices int64
}

// RolloutNotice is how ApplyTransition tells a rollout's state
// (TransitionParams.Rollout). When the operation as written has a
// RolloutID, the move locks the rollout's row (inserting it the first
// time), reads the rollout as the move leaves it (Lists, ListLimit as in
// RolloutReadParams) and calls Decide with it, the mark as the last
// summary left it, and the operation and event the move wrote. Decide
// returns the state to record and the jobs that tell it: when state is
// neither "" nor the mark's, the store sets the mark to it (Notices+1) and
// enqueues jobs, all in the move's transaction; otherwise it writes
// nothing and drops jobs. The row's lock orders the moves of one rollout,
// so two replicas never record, and never tell, one state twice.
type RolloutNotice struct {
	Lists     [][]int
	ListLimit int
	Decide    func(r Rollout, last RolloutMark, op Operation, ev Event) (state string, jobs []river.InsertManyParams)
}

// RolloutQueries are the queries of rollouts (issue 25 point 3).
type RolloutQueries interface {
	// RolloutCounts is the aggregate of the operations of rollout id by
	// project, status and step (one statement); none for an unknown id.
	RolloutCounts(ctx context.Context, id string) ([]RolloutCount, error)
	// RolloutListAtSteps lists up to limit operations of rollout id at
	// one of steps (not empty), oldest update first.
	RolloutListAtSteps(ctx context.Context, id string, steps []int, limit int) ([]Operation, error)
	// RolloutLock inserts the row of rollout id at now unless it exists,
	// then reads its mark, locked as OperationGetForUpdate locks an
	// operation (two statements).
	RolloutLock(ctx context.Context, id string, now time.Time) (RolloutMark, error)
	// RolloutSetMark writes m to the row of rollout id at now.
	RolloutSetMark(ctx context.Context, id string, m RolloutMark, now time.Time) error
}

// Rollouts are the reads of rollouts (issue 25 point 3).
type Rollouts interface {
	ReadRollout(ctx context.Context, db DBTX, p RolloutReadParams) (Rollout, error)
}

// ReadRollout reads the progress of rollout p.ID: its aggregate and the
// changes p lists. ErrNotFound (wrapped) when no change has the id.
func (s *DriverStore) ReadRollout(ctx context.Context, db DBTX, p RolloutReadParams) (Rollout, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return Rollout{}, err
	}
	r, err := readRollout(ctx, x, p)
	if err != nil {
		return Rollout{}, fmt.Errorf("reading rollout %q: %w", p.ID, err)
	}
	if len(r.Counts) == 0 {
		return Rollout{}, fmt.Errorf("reading rollout %q: %w", p.ID, ErrNotFound)
	}
	return r, nil
}

// readRollout is the aggregate of rollout p.ID and its listed changes.
func readRollout(ctx context.Context, x Executor, p RolloutReadParams) (Rollout, error) {
	counts, err := x.RolloutCounts(ctx, p.ID)
	if err != nil {
		return Rollout{}, err
	}
	r := Rollout{ID: p.ID, Counts: counts}
	for _, steps := range p.Lists {
		left := p.ListLimit - len(r.Listed)
		if left <= 0 || len(counts) == 0 {
			break
		}
		if len(steps) == 0 {
			continue
		}
		ops, err := x.RolloutListAtSteps(ctx, p.ID, steps, left)
		if err != nil {
			return Rollout{}, fmt.Errorf("listing its changes: %w", err)
		}
		r.Listed = append(r.Listed, ops...)
	}
	return r, nil
}

// errNoDecide refuses a RolloutNotice without its Decide.
var errNoDecide = errors.New("a rollout notice needs its Decide")

// noticeRollout is ApplyTransition's part of a rollout (RolloutNotice):
// the jobs that tell the rollout's new state, its mark recorded, or none.
func (s *DriverStore) noticeRollout(ctx context.Context, x Executor, n *RolloutNotice, op Operation, ev Event) ([]river.InsertManyParams, error) {
	if n == nil || op.RolloutID == "" {
		return nil, nil
	}
	if n.Decide == nil {
		return nil, errNoDecide
	}
	now := s.Now()
	mark, err := x.RolloutLock(ctx, op.RolloutID, now)
	if err != nil {
		return nil, fmt.Errorf("locking rollout %q: %w", op.RolloutID, err)
	}
	// Read after the lock: on PostgreSQL (READ COMMITTED) each statement
	// sees what committed before it, so the previous holder's move is in.
	r, err := readRollout(ctx, x, RolloutReadParams{ID: op.RolloutID, Lists: n.Lists, ListLimit: n.ListLimit})
	if err != nil {
		return nil, fmt.Errorf("reading rollout %q: %w", op.RolloutID, err)
	}
	state, jobs := n.Decide(r, mark, op, ev)
	if state == "" || state == mark.State {
		return nil, nil
	}
	if err := x.RolloutSetMark(ctx, op.RolloutID, RolloutMark{State: state, Notices: mark.Notices + 1}, now); err != nil {
		return nil, fmt.Errorf("recording rollout %q at %s: %w", op.RolloutID, state, err)
	}
	return jobs, nil
}
