-- 0018: the webhook intake stores a batch of deliveries with one autocommit
-- INSERT (one durable round trip on the request path, issue 12) and a
-- dispatcher enqueues their jobs afterwards. dispatched_at is when a
-- delivery's job was enqueued; NULL while it waits for the dispatcher.
-- Every delivery stored before this migration had its job enqueued in its
-- own transaction.
ALTER TABLE webhook_deliveries ADD COLUMN dispatched_at timestamptz;
UPDATE webhook_deliveries SET dispatched_at = received_at;
CREATE INDEX webhook_deliveries_undispatched ON webhook_deliveries (id) WHERE dispatched_at IS NULL;
