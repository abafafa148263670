package store

// Intake tables whose old rows PruneIntake deletes: the stored webhook
// deliveries and the callback dedupe rows. Events (change_events) are the
// history and are never pruned; the reconciler's deploy watermark lives in
// deploy_confirmations, not in callback_requests (migration 0010).
const (
	TableWebhookDeliveries = "webhook_deliveries"
	TableCallbackRequests  = "callback_requests"
)
