package store

import (
	"time"
)

// Delivery is one stored webhook delivery (table webhook_deliveries).
type Delivery struct {
	ID int64
	// DedupeKey is "idem:<Idempotency-Key>" or "sha256:<body hash>"; unique.
	DedupeKey string
	Event     string // X-Gitlab-Event, e.g. "Pipeline Hook"
	ProjectID int64
	// Body is the request body as received, stored byte for byte (bytea,
	// migration 0008): jsonb refused the escape \u0000 and reformatted.
	Body        []byte
	ReceivedAt  time.Time
	ProcessedAt *time.Time
	Outcome     string
	// DispatchedAt is when the delivery's job was enqueued; nil while it
	// waits for the dispatcher (StoreDeliveries, DispatchDeliveries).
	DispatchedAt *time.Time
}

// DeliveryInsert is InsertDeliveries' answer for one delivery.
type DeliveryInsert struct {
	// ID is the stored delivery's id; 0 when Inserted is false.
	ID int64
	// Inserted is false when the delivery's DedupeKey was stored before,
	// by an earlier call or by an earlier delivery of the same call.
	Inserted bool
}

// FirstOfKey returns, for each delivery of ds, the index in ds of the first
// delivery with the same DedupeKey (its own index when it is the first).
// Implementations of InsertDeliveries store only the firsts: a later copy in
// the same batch is a duplicate of the first.
func FirstOfKey(ds []Delivery) []int {
	first := make(map[string]int, len(ds))
	out := make([]int, len(ds))
	for i, d := range ds {
		j, ok := first[d.DedupeKey]
		if !ok {
			first[d.DedupeKey], j = i, i
		}
		out[i] = j
	}
	return out
}
