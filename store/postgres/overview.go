package postgres

import (
	"context"
	"time"

	"changebot/store"
)

// The overview's statements are hand-written: the job count reads River's
// river_job, which sqlc does not know.

// OverviewByProject implements store.OverviewQueries; each status is a
// range of the (status, updated_at) index.
func (x executor) OverviewByProject(ctx context.Context, statuses []string) ([]store.ProjectCount, error) {
	rows, err := x.q.Query(ctx, `SELECT project, status, count(*) FROM operations
		WHERE status = ANY($1) GROUP BY project, status ORDER BY project, status`, statuses)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ScanProjectCounts(rows)
}

// OverviewLastDelivery implements store.OverviewQueries (the
// received_at index, newest first).
func (x executor) OverviewLastDelivery(ctx context.Context) (time.Time, error) {
	var at *time.Time
	if err := x.q.QueryRow(ctx, `SELECT max(received_at) FROM webhook_deliveries`).Scan(&at); err != nil {
		return time.Time{}, err
	}
	if at == nil {
		return time.Time{}, nil
	}
	return at.UTC(), nil
}

// OverviewFailingJobs implements store.OverviewQueries (River's state
// index: retryable and discarded jobs are few).
func (x executor) OverviewFailingJobs(ctx context.Context, since time.Time) (int, int, error) {
	var retrying, discarded int
	err := x.q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'retryable'),
			count(*) FILTER (WHERE state = 'discarded' AND finalized_at >= $1)
		FROM river_job WHERE state IN ('retryable', 'discarded')`, since).Scan(&retrying, &discarded)
	return retrying, discarded, err
}
