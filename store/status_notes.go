package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// StatusNote records which MR note holds an operation's status comment
// (DESIGN §7) and the last event sequence rendered into it.
type StatusNote struct {
	ProjectID   int64
	MRIID       int64
	NoteID      int64
	OperationID string
	RenderedSeq int64
}

// GetStatusNote reads the status note of an MR; ErrNotFound when none.
func (s *Store) GetStatusNote(ctx context.Context, db DBTX, projectID, iid int64) (StatusNote, error) {
	var n StatusNote
	err := db.QueryRow(ctx, `SELECT project_id, mr_iid, note_id, operation_id, rendered_seq
		FROM status_notes WHERE project_id = $1 AND mr_iid = $2`, projectID, iid).
		Scan(&n.ProjectID, &n.MRIID, &n.NoteID, &n.OperationID, &n.RenderedSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return StatusNote{}, ErrNotFound
	}
	if err != nil {
		return StatusNote{}, fmt.Errorf("reading status note of !%d: %w", iid, err)
	}
	return n, nil
}

// SaveStatusNote records n unless a newer render is already recorded
// (rendered_seq greater than n's, for the same note). It reports whether it
// wrote, so an older render never overwrites a newer one.
func (s *Store) SaveStatusNote(ctx context.Context, db DBTX, n StatusNote) (bool, error) {
	tag, err := db.Exec(ctx, `INSERT INTO status_notes (project_id, mr_iid, note_id, operation_id, rendered_seq, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (project_id, mr_iid) DO UPDATE
		SET note_id = EXCLUDED.note_id, operation_id = EXCLUDED.operation_id,
		    rendered_seq = EXCLUDED.rendered_seq, updated_at = EXCLUDED.updated_at
		WHERE status_notes.rendered_seq <= EXCLUDED.rendered_seq
		   OR status_notes.note_id <> EXCLUDED.note_id
		   OR status_notes.operation_id <> EXCLUDED.operation_id`,
		n.ProjectID, n.MRIID, n.NoteID, n.OperationID, n.RenderedSeq, s.Now())
	if err != nil {
		return false, fmt.Errorf("saving status note of !%d: %w", n.MRIID, err)
	}
	return tag.RowsAffected() > 0, nil
}
