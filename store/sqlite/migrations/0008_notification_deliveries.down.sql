DROP INDEX IF EXISTS notification_deliveries_first;
DROP INDEX IF EXISTS notification_deliveries_operation;
DROP TABLE IF EXISTS notification_deliveries;
