-- 0008, as PostgreSQL's 0020: the delivery log of outgoing notifications
-- (issue 25 point 3). One row per (destination, delivery_key):
-- delivery_key is the idempotency key "<operation_id>:<event seq>" sent as
-- X-Changebot-Delivery. attempts counts the POSTs made; last_status_code
-- (0: no answer) and last_error are the last one's; delivered_at is set by
-- the first 2xx. state is retrying, delivered or failed.
CREATE TABLE notification_deliveries (
    destination      TEXT NOT NULL,
    delivery_key     TEXT NOT NULL,
    event            TEXT NOT NULL,
    operation_id     TEXT NOT NULL,
    state            TEXT NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 1,
    last_status_code INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT NOT NULL DEFAULT '',
    first_attempt_at TEXT NOT NULL,
    last_attempt_at  TEXT NOT NULL,
    delivered_at     TEXT,
    PRIMARY KEY (destination, delivery_key)
);

CREATE INDEX notification_deliveries_operation ON notification_deliveries (operation_id, first_attempt_at);
CREATE INDEX notification_deliveries_first ON notification_deliveries (first_attempt_at);
