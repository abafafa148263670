DROP TABLE IF EXISTS notification_deliveries;
