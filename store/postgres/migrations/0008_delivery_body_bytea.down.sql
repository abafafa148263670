-- Back to jsonb. A stored body that jsonb cannot hold (one with \u0000, or
-- not valid UTF-8) makes this fail: delete those rows first.
ALTER TABLE webhook_deliveries
    ALTER COLUMN body TYPE jsonb USING convert_from(body, 'UTF8')::jsonb;
