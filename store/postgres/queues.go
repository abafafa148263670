package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"changebot/store"
)

// The statements of this file are hand-written (the merge queues, issue
// 22; migration 0019).

// QueueEnsure implements store.QueueQueries.
func (x executor) QueueEnsure(ctx context.Context, k store.QueueKey, now time.Time) error {
	_, err := x.q.Exec(ctx, `INSERT INTO merge_queues (platform, project_id, target_branch, updated_at)
		VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, store.PlatformOr(k.Platform), k.ProjectID, k.TargetBranch, now)
	return err
}

// QueueClaimHead implements store.QueueQueries: one compare-and-set
// UPDATE; a concurrent claim waits on the row's lock, then sees the head
// taken.
func (x executor) QueueClaimHead(ctx context.Context, p store.QueueHeadParams, now time.Time) (bool, error) {
	tag, err := x.q.Exec(ctx, `UPDATE merge_queues
		SET head_operation_id = $4, head_since = CASE WHEN head_operation_id = $4 THEN head_since ELSE $6 END, updated_at = $6
		WHERE platform = $1 AND project_id = $2 AND target_branch = $3
		  AND (head_operation_id IN ('', $4) OR ($5 <> '' AND head_operation_id = $5))`,
		store.PlatformOr(p.Key.Platform), p.Key.ProjectID, p.Key.TargetBranch, p.OperationID, p.Stale, now)
	return tag.RowsAffected() == 1, err
}

// QueueReleaseHead implements store.QueueQueries.
func (x executor) QueueReleaseHead(ctx context.Context, k store.QueueKey, operationID string, now time.Time, turn time.Duration) (bool, error) {
	tag, err := x.q.Exec(ctx, `UPDATE merge_queues SET head_operation_id = '', head_since = NULL, updated_at = $5,
			turn_avg_ms = CASE WHEN $6 <= 0 THEN turn_avg_ms WHEN turn_avg_ms = 0 THEN $6 ELSE (turn_avg_ms * 3 + $6) / 4 END
		WHERE platform = $1 AND project_id = $2 AND target_branch = $3 AND head_operation_id = $4 AND $4 <> ''`,
		store.PlatformOr(k.Platform), k.ProjectID, k.TargetBranch, operationID, now, turn.Milliseconds())
	return tag.RowsAffected() == 1, err
}

const queueColumns = `platform, project_id, target_branch, head_operation_id, head_since, frozen_by, frozen_reason, frozen_at, updated_at, turn_avg_ms`

func scanQueue(row pgx.Row, q *store.Queue) error {
	var headSince, frozenAt *time.Time
	var turnMS int64
	if err := row.Scan(&q.Key.Platform, &q.Key.ProjectID, &q.Key.TargetBranch, &q.HeadOperationID, &headSince,
		&q.FrozenBy, &q.FrozenReason, &frozenAt, &q.UpdatedAt, &turnMS); err != nil {
		return err
	}
	q.TurnAvg = time.Duration(turnMS) * time.Millisecond
	if headSince != nil {
		q.HeadSince = headSince.UTC()
	}
	if frozenAt != nil {
		q.FrozenAt = frozenAt.UTC()
	}
	q.UpdatedAt = q.UpdatedAt.UTC()
	return nil
}

// QueueGet implements store.QueueQueries.
func (x executor) QueueGet(ctx context.Context, k store.QueueKey) (store.Queue, error) {
	var q store.Queue
	err := scanQueue(x.q.QueryRow(ctx, `SELECT `+queueColumns+` FROM merge_queues
		WHERE platform = $1 AND project_id = $2 AND target_branch = $3`,
		store.PlatformOr(k.Platform), k.ProjectID, k.TargetBranch), &q)
	return q, noRows(err)
}

// QueueWaiting implements store.QueueQueries (index operations_queue).
func (x executor) QueueWaiting(ctx context.Context, k store.QueueKey, step, limit int) ([]store.QueuedOperation, error) {
	rows, err := x.q.Query(ctx, `SELECT o.id, o.mr_iid, o.mr_web_url, o.title, o.subject_id, o.target_key, o.step_started_at,
			f.moved_at, coalesce(f.moved_by, '')
		FROM operations o LEFT JOIN merge_queue_fronts f ON f.operation_id = o.id
		WHERE o.platform = $1 AND o.project_id = $2 AND o.target_branch = $3 AND o.step = $4
		ORDER BY f.moved_at ASC NULLS LAST, o.step_started_at, o.id
		LIMIT $5`, store.PlatformOr(k.Platform), k.ProjectID, k.TargetBranch, step, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.QueuedOperation
	for rows.Next() {
		var w store.QueuedOperation
		var front *time.Time
		if err := rows.Scan(&w.ID, &w.MRIID, &w.MRWebURL, &w.Title, &w.SubjectID, &w.TargetKey, &w.ReadyAt, &front, &w.FrontBy); err != nil {
			return nil, err
		}
		w.ReadyAt = w.ReadyAt.UTC()
		if front != nil {
			w.FrontAt = front.UTC()
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// QueueList implements store.QueueQueries.
func (x executor) QueueList(ctx context.Context, platform string, step int) ([]store.QueueSummary, error) {
	rows, err := x.q.Query(ctx, `SELECT q.platform, q.project_id, q.target_branch, q.head_operation_id, q.head_since,
			q.frozen_by, q.frozen_reason, q.frozen_at, q.updated_at, q.turn_avg_ms,
			(SELECT count(*) FROM operations o WHERE o.platform = q.platform AND o.project_id = q.project_id
				AND o.target_branch = q.target_branch AND o.step = $2)
		FROM merge_queues q WHERE $1 = '' OR q.platform = $1
		ORDER BY q.platform, q.project_id, q.target_branch`, platform, step)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.QueueSummary
	for rows.Next() {
		var s store.QueueSummary
		var headSince, frozenAt *time.Time
		var turnMS int64
		if err := rows.Scan(&s.Key.Platform, &s.Key.ProjectID, &s.Key.TargetBranch, &s.HeadOperationID, &headSince,
			&s.FrozenBy, &s.FrozenReason, &frozenAt, &s.UpdatedAt, &turnMS, &s.WaitingCount); err != nil {
			return nil, err
		}
		s.TurnAvg = time.Duration(turnMS) * time.Millisecond
		if headSince != nil {
			s.HeadSince = headSince.UTC()
		}
		if frozenAt != nil {
			s.FrozenAt = frozenAt.UTC()
		}
		s.UpdatedAt = s.UpdatedAt.UTC()
		out = append(out, s)
	}
	return out, rows.Err()
}

// QueueSetFrozen implements store.QueueQueries.
func (x executor) QueueSetFrozen(ctx context.Context, k store.QueueKey, by, reason string, at, now time.Time) error {
	var frozenAt *time.Time
	if !at.IsZero() {
		frozenAt = &at
	}
	_, err := x.q.Exec(ctx, `UPDATE merge_queues SET frozen_by = $4, frozen_reason = $5, frozen_at = $6, updated_at = $7
		WHERE platform = $1 AND project_id = $2 AND target_branch = $3`,
		store.PlatformOr(k.Platform), k.ProjectID, k.TargetBranch, by, reason, frozenAt, now)
	return err
}

// QueueFrontSet implements store.QueueQueries.
func (x executor) QueueFrontSet(ctx context.Context, operationID, by, reason string, at time.Time) error {
	_, err := x.q.Exec(ctx, `INSERT INTO merge_queue_fronts (operation_id, moved_by, reason, moved_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (operation_id) DO UPDATE SET moved_by = excluded.moved_by, reason = excluded.reason, moved_at = excluded.moved_at`,
		operationID, by, reason, at)
	return err
}

// QueueFrontDelete implements store.QueueQueries.
func (x executor) QueueFrontDelete(ctx context.Context, operationID string) error {
	_, err := x.q.Exec(ctx, `DELETE FROM merge_queue_fronts WHERE operation_id = $1`, operationID)
	return err
}
