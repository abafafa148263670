package sqlite

import (
	"context"
	"fmt"
	"time"

	"changebot/store"
)

// The statements of this file are hand-written (the merge queues, issue
// 22; migration 0007). Writers are serialised, so a compare-and-set needs
// no lock of its own.

// QueueEnsure implements store.QueueQueries.
func (x executor) QueueEnsure(ctx context.Context, k store.QueueKey, now time.Time) error {
	_, err := x.exec(ctx, `INSERT INTO merge_queues (platform, project_id, target_branch, updated_at)
		VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, store.PlatformOr(k.Platform), k.ProjectID, k.TargetBranch, now)
	return err
}

// QueueClaimHead implements store.QueueQueries: one compare-and-set UPDATE.
func (x executor) QueueClaimHead(ctx context.Context, p store.QueueHeadParams, now time.Time) (bool, error) {
	n, err := affected(x.exec(ctx, `UPDATE merge_queues
		SET head_since = CASE WHEN head_operation_id = ?1 THEN head_since ELSE ?3 END, head_operation_id = ?1, updated_at = ?3
		WHERE platform = ?4 AND project_id = ?5 AND target_branch = ?6
		  AND (head_operation_id IN ('', ?1) OR (?2 <> '' AND head_operation_id = ?2))`,
		p.OperationID, p.Stale, now, store.PlatformOr(p.Key.Platform), p.Key.ProjectID, p.Key.TargetBranch))
	return n == 1, err
}

// QueueReleaseHead implements store.QueueQueries.
func (x executor) QueueReleaseHead(ctx context.Context, k store.QueueKey, operationID string, now time.Time, turn time.Duration) (bool, error) {
	ms := turn.Milliseconds()
	n, err := affected(x.exec(ctx, `UPDATE merge_queues SET head_operation_id = '', head_since = NULL, updated_at = ?,
			turn_avg_ms = CASE WHEN ? <= 0 THEN turn_avg_ms WHEN turn_avg_ms = 0 THEN ? ELSE (turn_avg_ms * 3 + ?) / 4 END
		WHERE platform = ? AND project_id = ? AND target_branch = ? AND head_operation_id = ? AND head_operation_id <> ''`,
		now, ms, ms, ms, store.PlatformOr(k.Platform), k.ProjectID, k.TargetBranch, operationID))
	return n == 1, err
}

const queueColumns = `platform, project_id, target_branch, head_operation_id, head_since, frozen_by, frozen_reason, frozen_at, updated_at, turn_avg_ms`

// queueDest are the scan targets of queueColumns.
func queueDest(q *store.Queue) []any {
	return []any{&q.Key.Platform, &q.Key.ProjectID, &q.Key.TargetBranch, &q.HeadOperationID, tm{&q.HeadSince},
		&q.FrozenBy, &q.FrozenReason, tm{&q.FrozenAt}, tm{&q.UpdatedAt}, msDuration{&q.TurnAvg}}
}

// msDuration scans an integer of milliseconds into a time.Duration.
type msDuration struct{ d *time.Duration }

// Scan implements sql.Scanner.
func (m msDuration) Scan(src any) error {
	n, ok := src.(int64)
	if !ok {
		return fmt.Errorf("turn_avg_ms: %T is not an integer", src)
	}
	*m.d = time.Duration(n) * time.Millisecond
	return nil
}

// QueueGet implements store.QueueQueries.
func (x executor) QueueGet(ctx context.Context, k store.QueueKey) (store.Queue, error) {
	var q store.Queue
	err := x.queryRow(ctx, `SELECT `+queueColumns+` FROM merge_queues
		WHERE platform = ? AND project_id = ? AND target_branch = ?`,
		store.PlatformOr(k.Platform), k.ProjectID, k.TargetBranch).Scan(queueDest(&q)...)
	return q, noRows(err)
}

// QueueWaiting implements store.QueueQueries (index operations_queue).
func (x executor) QueueWaiting(ctx context.Context, k store.QueueKey, step, limit int) ([]store.QueuedOperation, error) {
	rows, err := x.query(ctx, `SELECT o.id, o.mr_iid, o.mr_web_url, o.title, o.subject_id, o.target_key, o.step_started_at,
			f.moved_at, coalesce(f.moved_by, '')
		FROM operations o LEFT JOIN merge_queue_fronts f ON f.operation_id = o.id
		WHERE o.platform = ? AND o.project_id = ? AND o.target_branch = ? AND o.step = ?
		ORDER BY f.moved_at ASC NULLS LAST, o.step_started_at, o.id
		LIMIT ?`, store.PlatformOr(k.Platform), k.ProjectID, k.TargetBranch, step, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.QueuedOperation
	for rows.Next() {
		var w store.QueuedOperation
		if err := rows.Scan(&w.ID, &w.MRIID, &w.MRWebURL, &w.Title, &w.SubjectID, &w.TargetKey, tm{&w.ReadyAt}, tm{&w.FrontAt}, &w.FrontBy); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// QueueList implements store.QueueQueries.
func (x executor) QueueList(ctx context.Context, platform string, step int) ([]store.QueueSummary, error) {
	rows, err := x.query(ctx, `SELECT q.platform, q.project_id, q.target_branch, q.head_operation_id, q.head_since,
			q.frozen_by, q.frozen_reason, q.frozen_at, q.updated_at, q.turn_avg_ms,
			(SELECT count(*) FROM operations o WHERE o.platform = q.platform AND o.project_id = q.project_id
				AND o.target_branch = q.target_branch AND o.step = ?2)
		FROM merge_queues q WHERE ?1 = '' OR q.platform = ?1
		ORDER BY q.platform, q.project_id, q.target_branch`, platform, step)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.QueueSummary
	for rows.Next() {
		var s store.QueueSummary
		if err := rows.Scan(append(queueDest(&s.Queue), &s.WaitingCount)...); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// QueueSetFrozen implements store.QueueQueries.
func (x executor) QueueSetFrozen(ctx context.Context, k store.QueueKey, by, reason string, at, now time.Time) error {
	var frozenAt any
	if !at.IsZero() {
		frozenAt = at
	}
	_, err := x.exec(ctx, `UPDATE merge_queues SET frozen_by = ?, frozen_reason = ?, frozen_at = ?, updated_at = ?
		WHERE platform = ? AND project_id = ? AND target_branch = ?`,
		by, reason, frozenAt, now, store.PlatformOr(k.Platform), k.ProjectID, k.TargetBranch)
	return err
}

// QueueFrontSet implements store.QueueQueries.
func (x executor) QueueFrontSet(ctx context.Context, operationID, by, reason string, at time.Time) error {
	_, err := x.exec(ctx, `INSERT INTO merge_queue_fronts (operation_id, moved_by, reason, moved_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (operation_id) DO UPDATE SET moved_by = excluded.moved_by, reason = excluded.reason, moved_at = excluded.moved_at`,
		operationID, by, reason, at)
	return err
}

// QueueFrontDelete implements store.QueueQueries.
func (x executor) QueueFrontDelete(ctx context.Context, operationID string) error {
	_, err := x.exec(ctx, `DELETE FROM merge_queue_fronts WHERE operation_id = ?`, operationID)
	return err
}
