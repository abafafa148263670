package sqlite

import (
	"context"
	"strings"
	"time"

	"changebot/store"
)

// The statements of this file are hand-written: they read or write River's
// river_job and river_leader tables (not in our migrations, so sqlc does
// not know them), finding a step's jobs through their JSON args
// (json_extract). Writers are serialised, so no row is skipped as locked.

// riverTS is t as River's SQLite driver stores times (milliseconds), for
// comparisons with and writes to its columns.
func riverTS(t time.Time) string {
	return t.UTC().Round(time.Millisecond).Format("2006-01-02 15:04:05.000")
}

// riverNow is SQLite's clock in River's format.
const riverNow = `strftime('%Y-%m-%d %H:%M:%f', 'now')`

// liveOfStep selects the ids of the live jobs of one step: its parameters
// are the operation id, the step and then the kinds (in a list of kinds
// placeholders).
func liveOfStep(kinds string) string {
	return `SELECT id FROM river_job
		WHERE json_extract(args, '$.operation_id') = ? AND json_extract(args, '$.step') = ? AND kind IN (` + kinds + `)
		  AND state IN ('available', 'pending', 'scheduled', 'running', 'retryable')`
}

// JobWakeLiveOfStep implements store.JobQueries with two statements (a
// count, then the UPDATE of those that wait) under the write lock.
func (x executor) JobWakeLiveOfStep(ctx context.Context, operationID string, step int, kinds []string, now time.Time) (int, error) {
	list, kargs := in(kinds)
	live := liveOfStep(list)
	args := append([]any{operationID, step}, kargs...)
	var n int
	if err := x.queryRow(ctx, `SELECT count(*) FROM (`+live+`)`, args...).Scan(&n); err != nil {
		return 0, err
	}
	due := riverTS(now)
	_, err := x.exec(ctx, `UPDATE river_job SET scheduled_at = ?, state = 'available'
		WHERE id IN (`+live+`) AND state IN ('available', 'scheduled', 'retryable') AND scheduled_at > ?`,
		append(append([]any{due}, args...), due)...)
	return n, err
}

// JobRetireOfStep implements store.JobQueries.
func (x executor) JobRetireOfStep(ctx context.Context, operationID string, step int, kinds []string) (int64, error) {
	ph, kargs := in(kinds)
	return affected(x.exec(ctx, `DELETE FROM river_job
		WHERE json_extract(args, '$.operation_id') = ? AND json_extract(args, '$.step') = ? AND kind IN (`+ph+`)
		  AND state IN ('available', 'pending', 'scheduled', 'retryable')`, append([]any{operationID, step}, kargs...)...))
}

// JobPostponeOfStep implements store.JobQueries.
func (x executor) JobPostponeOfStep(ctx context.Context, operationID string, step int, kinds []string, until time.Time) (int64, error) {
	kindList, kargs := in(kinds)
	return affected(x.exec(ctx, `UPDATE river_job SET scheduled_at = ?
		WHERE state = 'scheduled' AND kind IN (`+kindList+`) AND json_extract(args, '$.operation_id') = ?
		  AND json_extract(args, '$.step') = ? AND scheduled_at < ?`,
		append(append([]any{riverTS(until)}, kargs...), operationID, step, riverTS(until))...))
}

// JobWakeStaleWaits implements store.JobQueries.
func (x executor) JobWakeStaleWaits(ctx context.Context, p store.WakeParams, now time.Time) (int64, error) {
	steps, sargs := in(p.Steps)
	kinds, kargs := in(p.Kinds)
	args := append(append(kargs, riverTS(p.WakeAfter)), sargs...)
	args = append(args, p.QuietBefore, p.Limit)
	return affected(x.exec(ctx, `UPDATE river_job SET scheduled_at = ? WHERE id IN (
			SELECT j.id FROM river_job j JOIN operations o ON o.id = json_extract(j.args, '$.operation_id')
			WHERE j.state = 'scheduled' AND j.kind IN (`+kinds+`) AND j.scheduled_at > ?
			  AND json_extract(j.args, '$.step') = o.step AND o.step IN (`+steps+`) AND o.updated_at < ?
			ORDER BY o.updated_at LIMIT ?)`, append([]any{riverTS(now)}, args...)...))
}

// JobLeaderIs implements store.JobQueries.
func (x executor) JobLeaderIs(ctx context.Context, clientID string) (bool, error) {
	var ok bool
	err := x.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM river_leader WHERE leader_id = ? AND expires_at > `+riverNow+`)`,
		clientID).Scan(&ok)
	return ok, err
}

// prefixedOpColumns is opColumns qualified with the alias "o".
var prefixedOpColumns = func() string {
	cols := strings.Split(opColumns, ",")
	for i, c := range cols {
		c = strings.TrimSpace(c)
		switch {
		case strings.HasPrefix(c, "coalesce("):
			cols[i] = "coalesce(o." + strings.TrimPrefix(c, "coalesce(")
		case c == "'')":
			cols[i] = c
		default:
			cols[i] = "o." + c
		}
	}
	return strings.Join(cols, ", ")
}()

// OperationListStuck implements store.OperationQueries.
func (x executor) OperationListStuck(ctx context.Context, p store.StuckParams) ([]store.Operation, error) {
	steps, sargs := in(p.Steps)
	kinds, kargs := in(p.Kinds)
	args := append(append(sargs, p.QuietBefore), kargs...)
	return collectOperations(x.query(ctx, `SELECT `+prefixedOpColumns+` FROM operations o
		WHERE o.step IN (`+steps+`) AND o.updated_at < ? AND NOT EXISTS (
			SELECT 1 FROM river_job j
			WHERE json_extract(j.args, '$.operation_id') = o.id AND json_extract(j.args, '$.step') = o.step
			  AND j.kind IN (`+kinds+`)
			  AND j.state IN ('available', 'pending', 'scheduled', 'running', 'retryable'))
		ORDER BY o.updated_at LIMIT ?`, append(args, p.Limit)...))
}
