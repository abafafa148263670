package sqlite

import (
	"context"
	"database/sql"
	"time"

	"changebot/store"
	"changebot/store/sqlite/internal/dbtime"
)

// OverviewByProject implements store.OverviewQueries.
func (x executor) OverviewByProject(ctx context.Context, statuses []string) ([]store.ProjectCount, error) {
	marks, args := in(statuses)
	rows, err := x.query(ctx, `SELECT project, status, count(*) FROM operations
		WHERE status IN (`+marks+`) GROUP BY project, status ORDER BY project, status`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ScanProjectCounts(rows)
}

// OverviewLastDelivery implements store.OverviewQueries.
func (x executor) OverviewLastDelivery(ctx context.Context) (time.Time, error) {
	var at sql.NullString
	if err := x.queryRow(ctx, `SELECT max(received_at) FROM webhook_deliveries`).Scan(&at); err != nil {
		return time.Time{}, err
	}
	if !at.Valid {
		return time.Time{}, nil
	}
	var t dbtime.Time
	if err := t.Scan(at.String); err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// OverviewFailingJobs implements store.OverviewQueries.
func (x executor) OverviewFailingJobs(ctx context.Context, since time.Time) (int, int, error) {
	var retrying, discarded int
	err := x.queryRow(ctx, `SELECT count(CASE WHEN state = 'retryable' THEN 1 END),
			count(CASE WHEN state = 'discarded' AND finalized_at >= ? THEN 1 END)
		FROM river_job WHERE state IN ('retryable', 'discarded')`, riverTS(since)).Scan(&retrying, &discarded)
	return retrying, discarded, err
}
