package postgres

import (
	"context"
	"fmt"

	"changebot/store"
)

// AddGitLabApproval records username's approval of operationID once; it
// reports whether it is new, and the number of approvals that count now
// (CountGitLabApprovals).
func (s *Store) AddGitLabApproval(ctx context.Context, db store.DBTX, operationID, username, source string) (added bool, count int, err error) {
	tag, err := q(db).Exec(ctx, `INSERT INTO gitlab_approvals (operation_id, username, source, approved_at)
		VALUES ($1, $2, $3, $4) ON CONFLICT (operation_id, username) DO NOTHING`, operationID, username, source, s.Now())
	if err != nil {
		return false, 0, fmt.Errorf("recording approval of %s by %s: %w", operationID, username, err)
	}
	if count, err = s.CountGitLabApprovals(ctx, db, operationID); err != nil {
		return false, 0, err
	}
	return tag.RowsAffected() == 1, count, nil
}

// RemoveGitLabApproval forgets username's approval of operationID; it
// reports whether there was one.
func (s *Store) RemoveGitLabApproval(ctx context.Context, db store.DBTX, operationID, username string) (bool, error) {
	tag, err := q(db).Exec(ctx, `DELETE FROM gitlab_approvals WHERE operation_id = $1 AND username = $2`, operationID, username)
	if err != nil {
		return false, fmt.Errorf("removing approval of %s by %s: %w", operationID, username, err)
	}
	return tag.RowsAffected() == 1, nil
}

// CountGitLabApprovals returns how many approvers approved operationID,
// never counting the change's requester (nobody approves their own change,
// whatever was recorded).
func (s *Store) CountGitLabApprovals(ctx context.Context, db store.DBTX, operationID string) (int, error) {
	var n int
	if err := q(db).QueryRow(ctx, `SELECT count(*) FROM gitlab_approvals a JOIN operations o ON o.id = a.operation_id
		WHERE a.operation_id = $1 AND a.username <> o.requested_by`, operationID).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting approvals of %s: %w", operationID, err)
	}
	return n, nil
}

// ClearGitLabApprovals forgets every approval recorded for operationID (a
// change resumed after its merge request was closed counts only approvals
// given afresh, issue 10 point 1); it returns how many it forgot.
func (s *Store) ClearGitLabApprovals(ctx context.Context, db store.DBTX, operationID string) (int, error) {
	tag, err := q(db).Exec(ctx, `DELETE FROM gitlab_approvals WHERE operation_id = $1`, operationID)
	if err != nil {
		return 0, fmt.Errorf("clearing approvals of %s: %w", operationID, err)
	}
	return int(tag.RowsAffected()), nil
}
