package postgres

import (
	"context"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"
)

// RolloutCounts implements store.RolloutQueries.
func (x executor) RolloutCounts(ctx context.Context, id string) ([]store.RolloutCount, error) {
	rows, err := queries.RolloutCounts(ctx, x.q, id)
	if err != nil {
		return nil, err
	}
	var out []store.RolloutCount
	for _, r := range rows {
		out = append(out, store.RolloutCount{ProjectID: r.ProjectID, Project: r.Project, Status: r.Status, Step: r.Step,
			Count: int(r.N), FirstCreatedAt: r.FirstCreatedAt.UTC(), LastUpdatedAt: r.LastUpdatedAt.UTC()})
	}
	return out, nil
}

// RolloutListAtSteps implements store.RolloutQueries.
func (x executor) RolloutListAtSteps(ctx context.Context, id string, steps []int, max int) ([]store.Operation, error) {
	return manyOperations(queries.RolloutListAtSteps(ctx, x.q, &dbsqlc.RolloutListAtStepsParams{
		RolloutID: id, Steps: orEmpty(steps), Max: limit(max)}))
}

// RolloutLock implements store.RolloutQueries: the insert of a missing row
// waits for a concurrent inserter's transaction, so the row locked next is
// the committed one.
func (x executor) RolloutLock(ctx context.Context, id string, now time.Time) (store.RolloutMark, error) {
	if err := queries.RolloutEnsure(ctx, x.q, &dbsqlc.RolloutEnsureParams{RolloutID: id, Now: now}); err != nil {
		return store.RolloutMark{}, err
	}
	r, err := queries.RolloutGetForUpdate(ctx, x.q, id)
	if err != nil {
		return store.RolloutMark{}, noRows(err)
	}
	return store.RolloutMark{State: r.State, Notices: r.Notices}, nil
}

// RolloutSetMark implements store.RolloutQueries.
func (x executor) RolloutSetMark(ctx context.Context, id string, m store.RolloutMark, now time.Time) error {
	return queries.RolloutSetState(ctx, x.q, &dbsqlc.RolloutSetStateParams{RolloutID: id, State: m.State, Notices: m.Notices, Now: now})
}
