package postgres

import (
	"context"
	"time"

	"changebot/store"
)

// The statements of this file are hand-written: they read or write River's
// river_job and river_leader tables (not in our migrations, so sqlc does
// not know them), finding a step's jobs through their JSON args with a
// jsonb containment lookup or ->>.

// JobWakeLiveOfStep implements store.JobQueries in one statement: the
// live jobs are counted, those that wait made available, and their queues
// announced to River's producers (delivered at commit), in one CTE.
func (x executor) JobWakeLiveOfStep(ctx context.Context, operationID string, step int, kinds []string, now time.Time) (int, error) {
	var live int
	err := x.q.QueryRow(ctx, `WITH live AS (
			SELECT id, state FROM river_job
			WHERE args @> jsonb_build_object('operation_id', $1::text, 'step', $2::int) AND kind = ANY($3)
			  AND state IN ('available', 'pending', 'scheduled', 'running', 'retryable')),
		woken AS (
			UPDATE river_job SET scheduled_at = $4, state = 'available'
			WHERE id IN (SELECT id FROM live WHERE state IN ('available', 'scheduled', 'retryable')) AND scheduled_at > $4
			RETURNING queue),
		-- River's producers fetch inserted jobs at once on this
		-- announcement (the channel and payload of riverpgxv5's
		-- PGNotifyMany), and otherwise only at their poll interval (1 s).
		announced AS (
			SELECT pg_notify(current_schema() || '.river_insert', json_build_object('queue', q)::text)
			FROM (SELECT DISTINCT queue AS q FROM woken) w)
		SELECT (SELECT count(*) FROM live) + 0 * (SELECT count(*) FROM announced)`, operationID, step, kinds, now).Scan(&live)
	return live, err
}

// JobRetireOfStep implements store.JobQueries.
func (x executor) JobRetireOfStep(ctx context.Context, operationID string, step int, kinds []string) (int64, error) {
	tag, err := x.q.Exec(ctx, `DELETE FROM river_job
		WHERE args @> jsonb_build_object('operation_id', $1::text, 'step', $2::int) AND kind = ANY($3)
		  AND state IN ('available', 'pending', 'scheduled', 'retryable')`, operationID, step, kinds)
	return tag.RowsAffected(), err
}

// JobPostponeOfStep implements store.JobQueries.
func (x executor) JobPostponeOfStep(ctx context.Context, operationID string, step int, kinds []string, until time.Time) (int64, error) {
	tag, err := x.q.Exec(ctx, `UPDATE river_job SET scheduled_at = $4
		WHERE state = 'scheduled' AND kind = ANY($3) AND args->>'operation_id' = $1
		  AND (args->>'step')::int = $2 AND scheduled_at < $4`, operationID, step, kinds, until)
	return tag.RowsAffected(), err
}

// JobWakeStaleWaits implements store.JobQueries; jobs locked by another
// transaction are skipped (FOR UPDATE SKIP LOCKED).
func (x executor) JobWakeStaleWaits(ctx context.Context, p store.WakeParams, now time.Time) (int64, error) {
	tag, err := x.q.Exec(ctx, `UPDATE river_job SET scheduled_at = $6 WHERE id IN (
			SELECT j.id FROM river_job j JOIN operations o ON o.id = j.args->>'operation_id'
			WHERE j.state = 'scheduled' AND j.kind = ANY($2) AND j.scheduled_at > $4
			  AND (j.args->>'step')::int = o.step AND o.step = ANY($1) AND o.updated_at < $3
			ORDER BY o.updated_at LIMIT $5 FOR UPDATE OF j SKIP LOCKED)`,
		p.Steps, p.Kinds, p.QuietBefore, p.WakeAfter, p.Limit, now)
	return tag.RowsAffected(), err
}

// JobLeaderIs implements store.JobQueries (river_leader in the search_path
// or the schema of the pool).
func (x executor) JobLeaderIs(ctx context.Context, clientID string) (bool, error) {
	var ok bool
	err := x.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM river_leader WHERE leader_id = $1 AND expires_at > now())`,
		clientID).Scan(&ok)
	return ok, err
}
