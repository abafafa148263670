package postgres

import (
	"context"
	"fmt"
	"time"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"
)

// ClaimNote records that the commands of note noteID are being run; it
// returns false when the note was claimed before (a redelivery, an edit, a
// Note Hook of old GitLab without action), so commands run once per note id.
func (s *Store) ClaimNote(ctx context.Context, db store.DBTX, platform string, projectID, noteID, iid int64, author string) (bool, error) {
	n, err := queries.NoteCommandClaim(ctx, q(db), &dbsqlc.NoteCommandClaimParams{Platform: store.PlatformOr(platform), ProjectID: projectID, NoteID: noteID,
		MrIid: iid, Author: author, ReceivedAt: s.Now()})
	if err != nil {
		return false, fmt.Errorf("claiming note %d: %w", noteID, err)
	}
	return n == 1, nil
}

// SetNoteOutcome records what running a note's commands did.
func (s *Store) SetNoteOutcome(ctx context.Context, db store.DBTX, platform string, projectID, noteID int64, outcome string) error {
	err := queries.NoteCommandSetOutcome(ctx, q(db), &dbsqlc.NoteCommandSetOutcomeParams{Platform: store.PlatformOr(platform), ProjectID: projectID, NoteID: noteID, Outcome: outcome})
	if err != nil {
		return fmt.Errorf("recording outcome of note %d: %w", noteID, err)
	}
	return nil
}

// NoteActivity counts author's claimed notes since `since` and how many of
// them were answered as rate limited (for the per-user command rate limit).
func (s *Store) NoteActivity(ctx context.Context, db store.DBTX, author string, since time.Time) (notes, limited int, err error) {
	r, err := queries.NoteCommandActivity(ctx, q(db), &dbsqlc.NoteCommandActivityParams{Author: author, Since: since})
	if err != nil {
		return 0, 0, fmt.Errorf("counting notes of %s: %w", author, err)
	}
	return int(r.Notes), int(r.Limited), nil
}
