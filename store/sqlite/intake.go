package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"changebot/store"
)

// InsertDelivery implements store.Intake.
func (s *Store) InsertDelivery(ctx context.Context, d store.Delivery, job func(id int64) river.InsertManyParams) (id int64, inserted bool, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		err := conn{ex: tx}.QueryRow(ctx, `INSERT INTO webhook_deliveries (dedupe_key, event, project_id, body, received_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (dedupe_key) DO NOTHING RETURNING id`,
			d.DedupeKey, d.Event, d.ProjectID, d.Body, s.Now()).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("inserting delivery: %w", err)
		}
		inserted = true
		return s.enqueue(ctx, tx, []river.InsertManyParams{job(id)})
	})
	if err != nil {
		return 0, false, fmt.Errorf("storing %s delivery: %w", d.Event, err)
	}
	return id, inserted, nil
}

// GetDelivery implements store.Intake.
func (s *Store) GetDelivery(ctx context.Context, db store.DBTX, id int64) (store.Delivery, error) {
	var d store.Delivery
	err := q(db).QueryRow(ctx, `SELECT id, dedupe_key, event, project_id, body, received_at, processed_at, outcome
		FROM webhook_deliveries WHERE id = ?`, id).
		Scan(&d.ID, &d.DedupeKey, &d.Event, &d.ProjectID, &d.Body, tm{&d.ReceivedAt}, ntm{&d.ProcessedAt}, &d.Outcome)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Delivery{}, fmt.Errorf("reading delivery %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Delivery{}, fmt.Errorf("reading delivery %d: %w", id, err)
	}
	return d, nil
}

// MarkDeliveryProcessed implements store.Intake.
func (s *Store) MarkDeliveryProcessed(ctx context.Context, db store.DBTX, id int64, outcome string) error {
	if _, err := q(db).Exec(ctx, `UPDATE webhook_deliveries SET processed_at = ?, outcome = ? WHERE id = ?`, s.Now(), outcome, id); err != nil {
		return fmt.Errorf("marking delivery %d processed: %w", id, err)
	}
	return nil
}

// CountDeliveries implements store.Intake.
func (s *Store) CountDeliveries(ctx context.Context, db store.DBTX) (int, error) {
	var n int
	if err := q(db).QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries`).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting deliveries: %w", err)
	}
	return n, nil
}

// LastDeliveryID implements store.Intake.
func (s *Store) LastDeliveryID(ctx context.Context, db store.DBTX) (int64, error) {
	var id int64
	if err := q(db).QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM webhook_deliveries`).Scan(&id); err != nil {
		return 0, fmt.Errorf("reading the newest delivery id: %w", err)
	}
	return id, nil
}

// DeliveriesAfter implements store.Intake.
func (s *Store) DeliveriesAfter(ctx context.Context, db store.DBTX, after int64) ([]store.Delivery, error) {
	rows, err := q(db).Query(ctx, `SELECT id, dedupe_key, event, project_id, received_at FROM webhook_deliveries
		WHERE id > ? ORDER BY id LIMIT 100`, after)
	if err != nil {
		return nil, fmt.Errorf("reading deliveries after %d: %w", after, err)
	}
	defer rows.Close()
	var out []store.Delivery
	for rows.Next() {
		var d store.Delivery
		if err := rows.Scan(&d.ID, &d.DedupeKey, &d.Event, &d.ProjectID, tm{&d.ReceivedAt}); err != nil {
			return nil, fmt.Errorf("reading deliveries after %d: %w", after, err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// InsertCallbackRequest implements store.Intake.
func (s *Store) InsertCallbackRequest(ctx context.Context, db store.DBTX, requestID, kind, operationID, result string) error {
	res, err := q(db).Exec(ctx, `INSERT INTO callback_requests (request_id, kind, operation_id, result, received_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (kind, request_id) DO NOTHING`, requestID, kind, operationID, result, s.Now())
	if err != nil {
		return fmt.Errorf("recording %s callback request %s: %w", kind, requestID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrDuplicate
	}
	return nil
}

// CallbackResult implements store.Intake.
func (s *Store) CallbackResult(ctx context.Context, db store.DBTX, kind, requestID string) (string, error) {
	var r string
	err := q(db).QueryRow(ctx, `SELECT result FROM callback_requests WHERE kind = ? AND request_id = ?`, kind, requestID).Scan(&r)
	if errors.Is(err, sql.ErrNoRows) {
		return "", store.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading %s callback request %s: %w", kind, requestID, err)
	}
	return r, nil
}

// ClaimNote implements store.Intake.
func (s *Store) ClaimNote(ctx context.Context, db store.DBTX, projectID, noteID, iid int64, author string) (bool, error) {
	res, err := q(db).Exec(ctx, `INSERT INTO note_commands (project_id, note_id, mr_iid, author, received_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (project_id, note_id) DO NOTHING`, projectID, noteID, iid, author, s.Now())
	if err != nil {
		return false, fmt.Errorf("claiming note %d: %w", noteID, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// SetNoteOutcome implements store.Intake.
func (s *Store) SetNoteOutcome(ctx context.Context, db store.DBTX, projectID, noteID int64, outcome string) error {
	if _, err := q(db).Exec(ctx, `UPDATE note_commands SET outcome = ? WHERE project_id = ? AND note_id = ?`, outcome, projectID, noteID); err != nil {
		return fmt.Errorf("recording outcome of note %d: %w", noteID, err)
	}
	return nil
}

// NoteActivity implements store.Intake.
func (s *Store) NoteActivity(ctx context.Context, db store.DBTX, author string, since time.Time) (notes, limited int, err error) {
	err = q(db).QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE outcome = 'rate_limited')
		FROM note_commands WHERE author = ? AND received_at >= ?`, author, since).Scan(&notes, &limited)
	if err != nil {
		return 0, 0, fmt.Errorf("counting notes of %s: %w", author, err)
	}
	return notes, limited, nil
}

// PruneIntake implements store.Intake.
func (s *Store) PruneIntake(ctx context.Context, table string, before time.Time, limit int) (int64, error) {
	var stmt string
	switch table {
	case store.TableWebhookDeliveries:
		stmt = `DELETE FROM webhook_deliveries WHERE id IN (
			SELECT id FROM webhook_deliveries WHERE received_at < ? AND processed_at IS NOT NULL
			ORDER BY received_at LIMIT ?)`
	case store.TableCallbackRequests:
		stmt = `DELETE FROM callback_requests WHERE rowid IN (
			SELECT rowid FROM callback_requests WHERE received_at < ?
			ORDER BY received_at LIMIT ?)`
	default:
		return 0, fmt.Errorf("pruning %q: not an intake table", table)
	}
	res, err := q(s.DB()).Exec(ctx, stmt, before, limit)
	if err != nil {
		return 0, fmt.Errorf("pruning %s received before %s: %w", table, before.UTC().Format(time.RFC3339), err)
	}
	return res.RowsAffected()
}

// AddGitLabApproval implements store.Approvals.
func (s *Store) AddGitLabApproval(ctx context.Context, db store.DBTX, operationID, username, source string) (added bool, count int, err error) {
	res, err := q(db).Exec(ctx, `INSERT INTO gitlab_approvals (operation_id, username, source, approved_at)
		VALUES (?, ?, ?, ?) ON CONFLICT (operation_id, username) DO NOTHING`, operationID, username, source, s.Now())
	if err != nil {
		return false, 0, fmt.Errorf("recording approval of %s by %s: %w", operationID, username, err)
	}
	if count, err = s.CountGitLabApprovals(ctx, db, operationID); err != nil {
		return false, 0, err
	}
	n, _ := res.RowsAffected()
	return n == 1, count, nil
}

// RemoveGitLabApproval implements store.Approvals.
func (s *Store) RemoveGitLabApproval(ctx context.Context, db store.DBTX, operationID, username string) (bool, error) {
	res, err := q(db).Exec(ctx, `DELETE FROM gitlab_approvals WHERE operation_id = ? AND username = ?`, operationID, username)
	if err != nil {
		return false, fmt.Errorf("removing approval of %s by %s: %w", operationID, username, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// CountGitLabApprovals implements store.Approvals.
func (s *Store) CountGitLabApprovals(ctx context.Context, db store.DBTX, operationID string) (int, error) {
	var n int
	if err := q(db).QueryRow(ctx, `SELECT count(*) FROM gitlab_approvals a JOIN operations o ON o.id = a.operation_id
		WHERE a.operation_id = ? AND a.username <> o.requested_by`, operationID).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting approvals of %s: %w", operationID, err)
	}
	return n, nil
}

// ClearGitLabApprovals implements store.Approvals.
func (s *Store) ClearGitLabApprovals(ctx context.Context, db store.DBTX, operationID string) (int, error) {
	res, err := q(db).Exec(ctx, `DELETE FROM gitlab_approvals WHERE operation_id = ?`, operationID)
	if err != nil {
		return 0, fmt.Errorf("clearing approvals of %s: %w", operationID, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// AccountBlockedUntil implements store.AccountWaits.
func (s *Store) AccountBlockedUntil(ctx context.Context, account string) (time.Time, error) {
	var until time.Time
	err := q(s.DB()).QueryRow(ctx, `SELECT blocked_until FROM gitlab_account_waits WHERE account = ?`, account).Scan(tm{&until})
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the wait of gitlab account %s: %w", account, err)
	}
	return until, nil
}

// BlockAccountUntil implements store.AccountWaits.
func (s *Store) BlockAccountUntil(ctx context.Context, account string, until time.Time) error {
	_, err := q(s.DB()).Exec(ctx, `INSERT INTO gitlab_account_waits (account, blocked_until, updated_at)
		VALUES (?, ?, ?)
		ON CONFLICT (account) DO UPDATE
		SET blocked_until = max(gitlab_account_waits.blocked_until, excluded.blocked_until),
		    updated_at = excluded.updated_at`, account, until, s.Now())
	if err != nil {
		return fmt.Errorf("recording the wait of gitlab account %s: %w", account, err)
	}
	return nil
}
