DROP TABLE change_snapshots;
