package store

import (
	"context"
	"fmt"
	"time"
)

// ProjectCount is how many operations of one project are in one binding
// status.
type ProjectCount struct {
	Project string
	Status  string
	Count   int
}

// Overview is what the operators' overview page counts (issue 23 point 1):
// the changes of statuses per project, when a webhook delivery was last
// stored, and the step jobs that are failing.
type Overview struct {
	// ByProject counts the operations of each project in each of the
	// asked statuses (only pairs with at least one), by project then
	// status.
	ByProject []ProjectCount
	// LastDeliveryAt is when the newest stored webhook delivery was
	// received; zero without one.
	LastDeliveryAt time.Time
	// RetryingJobs are the jobs waiting to retry after an error;
	// DiscardedJobs those that gave up since the asked moment.
	RetryingJobs, DiscardedJobs int
}

// OverviewQueries are the overview page's reads.
type OverviewQueries interface {
	// OverviewByProject counts operations by project and status for
	// statuses, ordered by project then status.
	OverviewByProject(ctx context.Context, statuses []string) ([]ProjectCount, error)
	// OverviewLastDelivery is the received_at of the newest stored webhook
	// delivery; the zero time without one.
	OverviewLastDelivery(ctx context.Context) (time.Time, error)
	// OverviewFailingJobs counts River's retryable jobs, and its jobs
	// discarded at or after since.
	OverviewFailingJobs(ctx context.Context, since time.Time) (retrying, discarded int, err error)
}

// Rows are the rows of a query of either engine (pgx.Rows, *sql.Rows).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ScanProjectCounts reads rows of (project, status, count), for the
// drivers' OverviewByProject.
func ScanProjectCounts(rows Rows) ([]ProjectCount, error) {
	var out []ProjectCount
	for rows.Next() {
		var c ProjectCount
		if err := rows.Scan(&c.Project, &c.Status, &c.Count); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ReadOverview reads the overview (three statements, not one snapshot:
// a page of counts, each exact when read): the changes in statuses per
// project, the last stored delivery, the jobs retrying and those discarded
// since discardedSince.
func (s *DriverStore) ReadOverview(ctx context.Context, db DBTX, statuses []string, discardedSince time.Time) (Overview, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return Overview{}, err
	}
	var o Overview
	if len(statuses) > 0 {
		if o.ByProject, err = x.OverviewByProject(ctx, statuses); err != nil {
			return Overview{}, fmt.Errorf("counting changes by project: %w", err)
		}
	}
	if o.LastDeliveryAt, err = x.OverviewLastDelivery(ctx); err != nil {
		return Overview{}, fmt.Errorf("reading the last webhook delivery: %w", err)
	}
	if o.RetryingJobs, o.DiscardedJobs, err = x.OverviewFailingJobs(ctx, discardedSince); err != nil {
		return Overview{}, fmt.Errorf("counting failing jobs: %w", err)
	}
	return o, nil
}
