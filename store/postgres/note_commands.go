package postgres

import (
	"context"
	"fmt"
	"time"

	"changebot/store"
)

// ClaimNote records that the commands of note noteID are being run; it
// returns false when the note was claimed before (a redelivery, an edit, a
// Note Hook of old GitLab without action), so commands run once per note id.
func (s *Store) ClaimNote(ctx context.Context, db store.DBTX, projectID, noteID, iid int64, author string) (bool, error) {
	tag, err := q(db).Exec(ctx, `INSERT INTO note_commands (project_id, note_id, mr_iid, author, received_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (project_id, note_id) DO NOTHING`, projectID, noteID, iid, author, s.Now())
	if err != nil {
		return false, fmt.Errorf("claiming note %d: %w", noteID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// SetNoteOutcome records what running a note's commands did.
func (s *Store) SetNoteOutcome(ctx context.Context, db store.DBTX, projectID, noteID int64, outcome string) error {
	_, err := q(db).Exec(ctx, `UPDATE note_commands SET outcome = $3 WHERE project_id = $1 AND note_id = $2`, projectID, noteID, outcome)
	if err != nil {
		return fmt.Errorf("recording outcome of note %d: %w", noteID, err)
	}
	return nil
}

// NoteActivity counts author's claimed notes since `since` and how many of
// them were answered as rate limited (for the per-user command rate limit).
func (s *Store) NoteActivity(ctx context.Context, db store.DBTX, author string, since time.Time) (notes, limited int, err error) {
	err = q(db).QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE outcome = 'rate_limited')
		FROM note_commands WHERE author = $1 AND received_at >= $2`, author, since).Scan(&notes, &limited)
	if err != nil {
		return 0, 0, fmt.Errorf("counting notes of %s: %w", author, err)
	}
	return notes, limited, nil
}
