-- 0013: the retention job (package retention) deletes intake rows by age,
-- oldest first, in batches; these indexes keep each batch from scanning the
-- whole table.
CREATE INDEX webhook_deliveries_received_at ON webhook_deliveries (received_at);
CREATE INDEX callback_requests_received_at ON callback_requests (received_at);
