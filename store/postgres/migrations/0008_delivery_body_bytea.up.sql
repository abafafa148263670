-- 0008: webhook_deliveries.body holds the raw request body, byte for byte.
-- As jsonb it refused bodies PostgreSQL cannot represent there (the JSON
-- escape \u0000, SQLSTATE 22P05), so such a delivery could never be stored
-- and GitLab saw 503 on every resend; jsonb also reformatted the body.
ALTER TABLE webhook_deliveries
    ALTER COLUMN body TYPE bytea USING convert_to(body::text, 'UTF8');
