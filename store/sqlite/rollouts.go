package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"changebot/store"
	"changebot/store/sqlite/internal/dbsqlc"
	"changebot/store/sqlite/internal/dbtime"
)

// RolloutCounts implements store.RolloutQueries.
func (x executor) RolloutCounts(ctx context.Context, id string) ([]store.RolloutCount, error) {
	rows, err := queries.RolloutCounts(ctx, x.ex, id)
	if err != nil {
		return nil, err
	}
	var out []store.RolloutCount
	for _, r := range rows {
		var first, last dbtime.Time
		if err := errors.Join(first.Scan(r.FirstCreatedAt), last.Scan(r.LastUpdatedAt)); err != nil {
			return nil, fmt.Errorf("reading the times of rollout %q: %w", id, err)
		}
		out = append(out, store.RolloutCount{ProjectID: r.ProjectID, Project: r.Project, Status: r.Status, Step: r.Step,
			Count: int(r.N), FirstCreatedAt: first.Time, LastUpdatedAt: last.Time})
	}
	return out, nil
}

// RolloutListAtSteps implements store.RolloutQueries; sqlc.slice must not
// be empty, so no steps lists nothing.
func (x executor) RolloutListAtSteps(ctx context.Context, id string, steps []int, limit int) ([]store.Operation, error) {
	if len(steps) == 0 {
		return nil, nil
	}
	rows, err := queries.RolloutListAtSteps(ctx, x.ex, &dbsqlc.RolloutListAtStepsParams{RolloutID: id, Steps: steps, Max: int64(limit)})
	return operations(rows, err, func(r dbsqlc.Operations) dbsqlc.Operations { return r })
}

// RolloutLock implements store.RolloutQueries: the transaction's write
// lock stands for the row's.
func (x executor) RolloutLock(ctx context.Context, id string, now time.Time) (store.RolloutMark, error) {
	if err := queries.RolloutEnsure(ctx, x.ex, &dbsqlc.RolloutEnsureParams{RolloutID: id, Now: dbtime.Of(now)}); err != nil {
		return store.RolloutMark{}, err
	}
	r, err := queries.RolloutGetForUpdate(ctx, x.ex, id)
	if err != nil {
		return store.RolloutMark{}, noRows(err)
	}
	return store.RolloutMark{State: r.State, Notices: r.Notices}, nil
}

// RolloutSetMark implements store.RolloutQueries.
func (x executor) RolloutSetMark(ctx context.Context, id string, m store.RolloutMark, now time.Time) error {
	return queries.RolloutSetState(ctx, x.ex, &dbsqlc.RolloutSetStateParams{RolloutID: id, State: m.State, Notices: m.Notices, Now: dbtime.Of(now)})
}
