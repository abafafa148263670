DROP TABLE IF EXISTS note_commands;
