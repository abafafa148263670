package postgres

import (
	"context"
	"time"

	"changebot/store/postgres/internal/dbsqlc"
)

// GitLabApprovalAdd implements store.ApprovalQueries.
func (x executor) GitLabApprovalAdd(ctx context.Context, operationID, username, source string, at time.Time) (bool, error) {
	n, err := queries.GitLabApprovalAdd(ctx, x.q, &dbsqlc.GitLabApprovalAddParams{OperationID: operationID,
		Username: username, Source: source, ApprovedAt: at})
	return n == 1, err
}

// GitLabApprovalRemove implements store.ApprovalQueries.
func (x executor) GitLabApprovalRemove(ctx context.Context, operationID, username string) (bool, error) {
	n, err := queries.GitLabApprovalRemove(ctx, x.q, &dbsqlc.GitLabApprovalRemoveParams{OperationID: operationID, Username: username})
	return n == 1, err
}

// GitLabApprovalCount implements store.ApprovalQueries.
func (x executor) GitLabApprovalCount(ctx context.Context, operationID string) (int64, error) {
	return queries.GitLabApprovalCount(ctx, x.q, operationID)
}

// GitLabApprovalClear implements store.ApprovalQueries.
func (x executor) GitLabApprovalClear(ctx context.Context, operationID string) (int64, error) {
	return queries.GitLabApprovalClear(ctx, x.q, operationID)
}
