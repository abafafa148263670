-- 0020: the delivery log of outgoing notifications (issue 25 point 3). One
-- row per (destination, delivery_key): delivery_key is the idempotency key
-- "<operation_id>:<event seq>" sent as X-Changebot-Delivery. attempts
-- counts the POSTs made; last_status_code (0: no answer) and last_error
-- are the last one's; delivered_at is set by the first 2xx. state is
-- retrying, delivered or failed.
CREATE TABLE notification_deliveries (
    destination      text NOT NULL,
    delivery_key     text NOT NULL,
    event            text NOT NULL,
    operation_id     text NOT NULL,
    state            text NOT NULL,
    attempts         integer NOT NULL DEFAULT 1,
    last_status_code integer NOT NULL DEFAULT 0,
    last_error       text NOT NULL DEFAULT '',
    first_attempt_at timestamptz NOT NULL,
    last_attempt_at  timestamptz NOT NULL,
    delivered_at     timestamptz,
    PRIMARY KEY (destination, delivery_key)
);

CREATE INDEX notification_deliveries_operation ON notification_deliveries (operation_id, first_attempt_at);
CREATE INDEX notification_deliveries_first ON notification_deliveries (first_attempt_at);
