package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"changebot/store"

	"github.com/jackc/pgx/v5"
)

// GetStatusNote reads the status note of an MR; ErrNotFound when none.
func (s *Store) GetStatusNote(ctx context.Context, db store.DBTX, projectID, iid int64) (store.StatusNote, error) {
	var n store.StatusNote
	err := q(db).QueryRow(ctx, `SELECT project_id, mr_iid, note_id, operation_id, rendered_seq
		FROM status_notes WHERE project_id = $1 AND mr_iid = $2`, projectID, iid).
		Scan(&n.ProjectID, &n.MRIID, &n.NoteID, &n.OperationID, &n.RenderedSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.StatusNote{}, store.ErrNotFound
	}
	if err != nil {
		return store.StatusNote{}, fmt.Errorf("reading status note of !%d: %w", iid, err)
	}
	return n, nil
}

// SaveStatusNote records n unless a newer render is already recorded
// (rendered_seq greater than n's, for the same note). It reports whether it
// wrote, so an older render never overwrites a newer one.
func (s *Store) SaveStatusNote(ctx context.Context, db store.DBTX, n store.StatusNote) (bool, error) {
	tag, err := q(db).Exec(ctx, `INSERT INTO status_notes (project_id, mr_iid, note_id, operation_id, rendered_seq, updated_at)
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

// ClaimStatusNote claims the status note of MR !iid of projectID until
// lease from now (store clock). ok is false, and nothing is written, while
// another claim on it is live. One statement.
func (s *Store) ClaimStatusNote(ctx context.Context, projectID, iid int64, lease time.Duration) (c store.NoteClaim, ok bool, err error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return store.NoteClaim{}, false, fmt.Errorf("making a claim token: %w", err)
	}
	c = store.NoteClaim{ProjectID: projectID, MRIID: iid, Token: hex.EncodeToString(b)}
	now := s.Now()
	tag, err := s.pool.Exec(ctx, `INSERT INTO status_note_claims (project_id, mr_iid, token, claimed_until)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (project_id, mr_iid) DO UPDATE SET token = EXCLUDED.token, claimed_until = EXCLUDED.claimed_until
		WHERE status_note_claims.claimed_until <= $5`, projectID, iid, c.Token, now.Add(lease), now)
	if err != nil {
		return store.NoteClaim{}, false, fmt.Errorf("claiming status note of !%d: %w", iid, err)
	}
	return c, tag.RowsAffected() == 1, nil
}

// RenewStatusNote extends claim c until lease from now (store clock) while
// its refresh still writes to GitLab. ok is false when c expired and another
// refresh took the note over (or it was released): the caller must stop
// writing. One statement.
func (s *Store) RenewStatusNote(ctx context.Context, c store.NoteClaim, lease time.Duration) (ok bool, err error) {
	tag, err := s.pool.Exec(ctx, `UPDATE status_note_claims SET claimed_until = $4
		WHERE project_id = $1 AND mr_iid = $2 AND token = $3`, c.ProjectID, c.MRIID, c.Token, s.Now().Add(lease))
	if err != nil {
		return false, fmt.Errorf("renewing status note claim of !%d: %w", c.MRIID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// RecordStatusNote records n (as SaveStatusNote: a newer render is never
// replaced) and releases claim c, in one transaction. It reports whether n
// was written.
func (s *Store) RecordStatusNote(ctx context.Context, c store.NoteClaim, n store.StatusNote) (bool, error) {
	var wrote bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if wrote, err = s.SaveStatusNote(ctx, txHandle{tx}, n); err != nil {
			return err
		}
		return s.ReleaseStatusNote(ctx, txHandle{tx}, c)
	})
	return wrote, err
}

// ReleaseStatusNote releases claim c (a no-op when it expired and another
// refresh took the note over).
func (s *Store) ReleaseStatusNote(ctx context.Context, db store.DBTX, c store.NoteClaim) error {
	_, err := q(db).Exec(ctx, `DELETE FROM status_note_claims WHERE project_id = $1 AND mr_iid = $2 AND token = $3`,
		c.ProjectID, c.MRIID, c.Token)
	if err != nil {
		return fmt.Errorf("releasing status note claim of !%d: %w", c.MRIID, err)
	}
	return nil
}
