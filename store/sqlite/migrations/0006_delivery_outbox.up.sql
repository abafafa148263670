-- 0006: dispatched_at, as PostgreSQL's 0018: when a delivery's job was
-- enqueued; NULL while it waits for the dispatcher. SQLite's intake still
-- stores and enqueues in one transaction (one writer, no network round
-- trip); the column lets a delivery copied from PostgreSQL before its
-- dispatch be dispatched here. Every delivery stored before this migration
-- had its job enqueued.
ALTER TABLE webhook_deliveries ADD COLUMN dispatched_at TEXT;
UPDATE webhook_deliveries SET dispatched_at = received_at;
CREATE INDEX webhook_deliveries_undispatched ON webhook_deliveries (id) WHERE dispatched_at IS NULL;
