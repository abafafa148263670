DROP TABLE IF EXISTS status_notes;
DROP TABLE IF EXISTS callback_requests;
DROP TABLE IF EXISTS webhook_deliveries;
DROP TABLE IF EXISTS change_events;
DROP TABLE IF EXISTS bindings;
DROP TABLE IF EXISTS operations;
