DROP INDEX IF EXISTS operations_adopted_mr;
ALTER TABLE operations DROP COLUMN adopted;
