DROP INDEX operations_step_updated;
