package sqlite

import (
	"context"
	"strings"

	"changebot/store"
	"changebot/store/sqlite/internal/dbtime"
)

// OperationList implements store.OperationQueries: the same page as the
// PostgreSQL driver's, newest first by id, with ids before p.Before.
func (x executor) OperationList(ctx context.Context, p store.ListParams) ([]store.Operation, error) {
	// Hand-written: the filters are optional and the stuck thresholds are
	// pairs, which sqlc's SQLite engine cannot express (sqlc.slice must not
	// be empty and has no arrays to index), so the WHERE is built from the
	// filters that are set, every value bound as a parameter.
	var where []string
	var args []any
	add := func(clause string, vals ...any) {
		where = append(where, clause)
		args = append(args, vals...)
	}
	if len(p.Statuses) > 0 {
		marks, vals := in(p.Statuses)
		add("status IN ("+marks+")", vals...)
	}
	if len(p.Steps) > 0 {
		marks, vals := in(p.Steps)
		add("step IN ("+marks+")", vals...)
	}
	if p.Project != "" {
		add("(lower(project) = lower(?) OR CAST(project_id AS TEXT) = ?)", p.Project, p.Project)
	}
	for _, f := range [][2]string{{"subject_id", p.SubjectID},
		{"target_key", p.TargetKey}, {"requested_by", p.RequestedBy}, {"rollout_id", p.RolloutID}} {
		if f[1] != "" {
			add(f[0]+" = ?", f[1])
		}
	}
	if !p.UpdatedAfter.IsZero() {
		add("updated_at > ?", dbtime.Of(p.UpdatedAfter))
	}
	if !p.UpdatedBefore.IsZero() {
		add("updated_at < ?", dbtime.Of(p.UpdatedBefore))
	}
	if p.StuckOnly {
		stuck := []string{"0"}
		var vals []any
		for _, b := range p.Stuck {
			stuck = append(stuck, "(step = ? AND step_started_at < ?)")
			vals = append(vals, b.Step, dbtime.Of(b.StartedBefore))
		}
		add("("+strings.Join(stuck, " OR ")+")", vals...)
	}
	if p.Before != "" {
		add("id < ?", p.Before)
	}
	query := `SELECT ` + opColumns + ` FROM operations`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	return collectOperations(x.query(ctx, query+` ORDER BY id DESC LIMIT ?`, append(args, p.Limit)...))
}
