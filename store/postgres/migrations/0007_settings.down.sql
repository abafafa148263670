DROP TABLE IF EXISTS settings_audit;
DROP TABLE IF EXISTS settings;
