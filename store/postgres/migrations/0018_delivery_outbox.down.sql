DROP INDEX webhook_deliveries_undispatched;
ALTER TABLE webhook_deliveries DROP COLUMN dispatched_at;
