package postgres

import (
	"context"
	"fmt"
	"time"

	"changebot/store"
)

// PruneIntake deletes at most limit rows of table (TableWebhookDeliveries
// or TableCallbackRequests) received before before, oldest first, in one
// statement, and returns how many it deleted. A delivery not yet processed
// is kept whatever its age. Callers loop while the count equals limit.
func (s *Store) PruneIntake(ctx context.Context, table string, before time.Time, limit int) (int64, error) {
	var q string
	switch table {
	case store.TableWebhookDeliveries:
		q = `DELETE FROM webhook_deliveries WHERE id IN (
			SELECT id FROM webhook_deliveries WHERE received_at < $1 AND processed_at IS NOT NULL
			ORDER BY received_at LIMIT $2)`
	case store.TableCallbackRequests:
		q = `DELETE FROM callback_requests WHERE (kind, request_id) IN (
			SELECT kind, request_id FROM callback_requests WHERE received_at < $1
			ORDER BY received_at LIMIT $2)`
	default:
		return 0, fmt.Errorf("pruning %q: not an intake table", table)
	}
	tag, err := s.pool.Exec(ctx, q, before.UTC(), limit)
	if err != nil {
		return 0, fmt.Errorf("pruning %s received before %s: %w", table, before.UTC().Format(time.RFC3339), err)
	}
	return tag.RowsAffected(), nil
}
