package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"

	"github.com/jackc/pgx/v5"
)

// GetStatusNote reads the status note of an MR; ErrNotFound when none.
func (s *Store) GetStatusNote(ctx context.Context, db store.DBTX, platform string, projectID, iid int64) (store.StatusNote, error) {
	r, err := queries.StatusNoteGet(ctx, q(db), &dbsqlc.StatusNoteGetParams{Platform: store.PlatformOr(platform), ProjectID: projectID, MrIid: iid})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.StatusNote{}, store.ErrNotFound
	}
	if err != nil {
		return store.StatusNote{}, fmt.Errorf("reading status note of !%d: %w", iid, err)
	}
	return store.StatusNote{Platform: r.Platform, ProjectID: r.ProjectID, MRIID: r.MrIid, NoteID: r.NoteID, OperationID: r.OperationID,
		RenderedSeq: r.RenderedSeq}, nil
}

// SaveStatusNote records n unless a newer render is already recorded
// (rendered_seq greater than n's, for the same note). It reports whether it
// wrote, so an older render never overwrites a newer one.
func (s *Store) SaveStatusNote(ctx context.Context, db store.DBTX, n store.StatusNote) (bool, error) {
	k, err := queries.StatusNoteSave(ctx, q(db), &dbsqlc.StatusNoteSaveParams{Platform: store.PlatformOr(n.Platform), ProjectID: n.ProjectID, MrIid: n.MRIID,
		NoteID: n.NoteID, OperationID: n.OperationID, RenderedSeq: n.RenderedSeq, UpdatedAt: s.Now()})
	if err != nil {
		return false, fmt.Errorf("saving status note of !%d: %w", n.MRIID, err)
	}
	return k > 0, nil
}

// ClaimStatusNote claims the status note of MR !iid of projectID until
// lease from now (store clock). ok is false, and nothing is written, while
// another claim on it is live. One statement.
func (s *Store) ClaimStatusNote(ctx context.Context, platform string, projectID, iid int64, lease time.Duration) (c store.NoteClaim, ok bool, err error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return store.NoteClaim{}, false, fmt.Errorf("making a claim token: %w", err)
	}
	c = store.NoteClaim{Platform: store.PlatformOr(platform), ProjectID: projectID, MRIID: iid, Token: hex.EncodeToString(b)}
	now := s.Now()
	n, err := queries.StatusNoteClaim(ctx, s.pool, &dbsqlc.StatusNoteClaimParams{Platform: c.Platform, ProjectID: projectID, MrIid: iid,
		Token: c.Token, ClaimedUntil: now.Add(lease), Now: now})
	if err != nil {
		return store.NoteClaim{}, false, fmt.Errorf("claiming status note of !%d: %w", iid, err)
	}
	return c, n == 1, nil
}

// RenewStatusNote extends claim c until lease from now (store clock) while
// its refresh still writes to GitLab. ok is false when c expired and another
// refresh took the note over (or it was released): the caller must stop
// writing. One statement.
func (s *Store) RenewStatusNote(ctx context.Context, c store.NoteClaim, lease time.Duration) (ok bool, err error) {
	n, err := queries.StatusNoteRenew(ctx, s.pool, &dbsqlc.StatusNoteRenewParams{Platform: store.PlatformOr(c.Platform), ProjectID: c.ProjectID, MrIid: c.MRIID,
		Token: c.Token, ClaimedUntil: s.Now().Add(lease)})
	if err != nil {
		return false, fmt.Errorf("renewing status note claim of !%d: %w", c.MRIID, err)
	}
	return n == 1, nil
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
	err := queries.StatusNoteRelease(ctx, q(db), &dbsqlc.StatusNoteReleaseParams{Platform: store.PlatformOr(c.Platform), ProjectID: c.ProjectID, MrIid: c.MRIID, Token: c.Token})
	if err != nil {
		return fmt.Errorf("releasing status note claim of !%d: %w", c.MRIID, err)
	}
	return nil
}

// StatusNoteState implements store.StatusNotes: one statement.
func (s *Store) StatusNoteState(ctx context.Context, db store.DBTX, id string) (store.NoteState, error) {
	r, err := queries.StatusNoteCurrent(ctx, q(db), id)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.NoteState{}, fmt.Errorf("status note state of %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.NoteState{}, fmt.Errorf("reading status note state of %s: %w", id, err)
	}
	return store.NoteState{Platform: r.Platform, ProjectID: r.ProjectID, MRIID: r.MrIid, LastSeq: r.LastSeq,
		NoteOperationID: r.NoteOperationID, RenderedSeq: r.RenderedSeq}, nil
}
