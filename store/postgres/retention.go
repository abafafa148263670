package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"
)

// PruneIntake deletes at most limit rows of table (TableWebhookDeliveries
// or TableCallbackRequests) received before before, oldest first, in one
// statement, and returns how many it deleted. A delivery not yet processed
// is kept whatever its age. Callers loop while the count equals limit.
func (s *Store) PruneIntake(ctx context.Context, table string, before time.Time, limit int) (int64, error) {
	var prune func(context.Context, dbsqlc.DBTX, time.Time, int32) (int64, error)
	switch table {
	case store.TableWebhookDeliveries:
		prune = func(ctx context.Context, db dbsqlc.DBTX, before time.Time, limit int32) (int64, error) {
			return queries.DeliveryPrune(ctx, db, &dbsqlc.DeliveryPruneParams{Before: before, Max: limit})
		}
	case store.TableCallbackRequests:
		prune = func(ctx context.Context, db dbsqlc.DBTX, before time.Time, limit int32) (int64, error) {
			return queries.CallbackRequestPrune(ctx, db, &dbsqlc.CallbackRequestPruneParams{Before: before, Max: limit})
		}
	default:
		return 0, fmt.Errorf("pruning %q: not an intake table", table)
	}
	n, err := prune(ctx, s.pool, before.UTC(), int32(min(limit, math.MaxInt32)))
	if err != nil {
		return 0, fmt.Errorf("pruning %s received before %s: %w", table, before.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}
