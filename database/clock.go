package database

import (
	"context"
	"fmt"
	"time"

	"changebot/config"
)

// Now returns the database's clock in UTC: on PostgreSQL one
// `SELECT clock_timestamp()` on the pool (microseconds; no table read);
// on SQLite the local clock, which is the database's (one process holds
// the file). Replicas measure their offset from it (budget.Clock) so that
// what they share through the database, the call budget and the account
// waits, runs on one clock whatever their own clocks say (issue 21 point
// 6). Errors are the database's, wrapped.
func (d *DB) Now(ctx context.Context) (time.Time, error) {
	if d.target.Engine == config.EngineSQLite {
		return time.Now().UTC(), nil
	}
	var now time.Time
	if err := d.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("reading the database's clock: %w", err)
	}
	return now.UTC(), nil
}
