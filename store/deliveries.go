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
}
