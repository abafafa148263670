package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"changebot/store"
)

// CountByStatusWithAge returns one StatusAge per status of statuses, in
// that order, zero counts included. One query; each status is read as a
// range of the (status, updated_at) index, so finished changes, whose
// statuses a caller leaves out, cost nothing however many there are.
func (s *Store) CountByStatusWithAge(ctx context.Context, db store.DBTX, statuses []string) ([]store.StatusAge, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	// Hand-written: the statement is built at run time, one UNION ALL
	// branch per status, which sqlc cannot express. One UNION ALL branch per status: the planner sees each status's own
	// value and reads it as an index range (a join over unnest would be
	// planned for an average status, often a scan of the whole table).
	parts := make([]string, len(statuses))
	args := make([]any, len(statuses))
	for i, st := range statuses {
		parts[i] = fmt.Sprintf(`(SELECT $%d::text, count(*), min(updated_at) FROM operations WHERE status = $%[1]d)`, i+1)
		args[i] = st
	}
	rows, err := q(db).Query(ctx, strings.Join(parts, " UNION ALL "), args...)
	if err != nil {
		return nil, fmt.Errorf("counting operations by status: %w", err)
	}
	defer rows.Close()
	byStatus := make(map[string]store.StatusAge, len(statuses))
	for rows.Next() {
		var a store.StatusAge
		var oldest *time.Time
		if err := rows.Scan(&a.Status, &a.Count, &oldest); err != nil {
			return nil, fmt.Errorf("counting operations by status: %w", err)
		}
		if oldest != nil {
			a.OldestUpdatedAt = oldest.UTC()
		}
		byStatus[a.Status] = a
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting operations by status: %w", err)
	}
	out := make([]store.StatusAge, len(statuses))
	for i, st := range statuses {
		out[i] = byStatus[st]
		out[i].Status = st
	}
	return out, nil
}

// IsJobLeader reports whether the River client clientID is the elected
// leader now (River's table river_leader, in the search_path or the
// schema of the pool). Only the leader runs cluster-wide duties such as the
// active changes gauge.
func (s *Store) IsJobLeader(ctx context.Context, db store.DBTX, clientID string) (bool, error) {
	// Hand-written: river_leader is River's table, not in our migrations.
	var ok bool
	err := q(db).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM river_leader WHERE leader_id = $1 AND expires_at > now())`,
		clientID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("reading the job queue leader: %w", err)
	}
	return ok, nil
}
