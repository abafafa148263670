package postgres

import (
	"context"
	"fmt"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"
)

// AddGitLabApproval records username's approval of operationID once; it
// reports whether it is new, and the number of approvals that count now
// (CountGitLabApprovals).
func (s *Store) AddGitLabApproval(ctx context.Context, db store.DBTX, operationID, username, source string) (added bool, count int, err error) {
	n, err := queries.GitLabApprovalAdd(ctx, q(db), &dbsqlc.GitLabApprovalAddParams{OperationID: operationID,
		Username: username, Source: source, ApprovedAt: s.Now()})
	if err != nil {
		return false, 0, fmt.Errorf("recording approval of %s by %s: %w", operationID, username, err)
	}
	if count, err = s.CountGitLabApprovals(ctx, db, operationID); err != nil {
		return false, 0, err
	}
	return n == 1, count, nil
}

// RemoveGitLabApproval forgets username's approval of operationID; it
// reports whether there was one.
func (s *Store) RemoveGitLabApproval(ctx context.Context, db store.DBTX, operationID, username string) (bool, error) {
	n, err := queries.GitLabApprovalRemove(ctx, q(db), &dbsqlc.GitLabApprovalRemoveParams{OperationID: operationID, Username: username})
	if err != nil {
		return false, fmt.Errorf("removing approval of %s by %s: %w", operationID, username, err)
	}
	return n == 1, nil
}

// CountGitLabApprovals returns how many approvers approved operationID,
// never counting the change's requester (nobody approves their own change,
// whatever was recorded).
func (s *Store) CountGitLabApprovals(ctx context.Context, db store.DBTX, operationID string) (int, error) {
	n, err := queries.GitLabApprovalCount(ctx, q(db), operationID)
	if err != nil {
		return 0, fmt.Errorf("counting approvals of %s: %w", operationID, err)
	}
	return int(n), nil
}

// ClearGitLabApprovals forgets every approval recorded for operationID (a
// change resumed after its merge request was closed counts only approvals
// given afresh, issue 10 point 1); it returns how many it forgot.
func (s *Store) ClearGitLabApprovals(ctx context.Context, db store.DBTX, operationID string) (int, error) {
	n, err := queries.GitLabApprovalClear(ctx, q(db), operationID)
	if err != nil {
		return 0, fmt.Errorf("clearing approvals of %s: %w", operationID, err)
	}
	return int(n), nil
}
