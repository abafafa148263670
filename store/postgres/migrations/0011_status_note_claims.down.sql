DROP TABLE status_note_claims;
