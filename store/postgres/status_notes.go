package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"
)

// StatusNoteGet implements store.StatusNoteQueries.
func (x executor) StatusNoteGet(ctx context.Context, platform string, projectID, iid int64) (store.StatusNote, error) {
	r, err := queries.StatusNoteGet(ctx, x.q, &dbsqlc.StatusNoteGetParams{Platform: platform, ProjectID: projectID, MrIid: iid})
	if err != nil {
		return store.StatusNote{}, noRows(err)
	}
	return store.StatusNote{Platform: r.Platform, ProjectID: r.ProjectID, MRIID: r.MrIid, NoteID: r.NoteID,
		OperationID: r.OperationID, RenderedSeq: r.RenderedSeq}, nil
}

// StatusNoteSave implements store.StatusNoteQueries.
func (x executor) StatusNoteSave(ctx context.Context, n store.StatusNote, at time.Time) (bool, error) {
	k, err := queries.StatusNoteSave(ctx, x.q, &dbsqlc.StatusNoteSaveParams{Platform: n.Platform, ProjectID: n.ProjectID,
		MrIid: n.MRIID, NoteID: n.NoteID, OperationID: n.OperationID, RenderedSeq: n.RenderedSeq, UpdatedAt: at})
	return k > 0, err
}

// StatusNoteClaim implements store.StatusNoteQueries.
func (x executor) StatusNoteClaim(ctx context.Context, c store.NoteClaim, until, now time.Time) (claimed, takenOver bool, err error) {
	takenOver, err = queries.StatusNoteClaim(ctx, x.q, &dbsqlc.StatusNoteClaimParams{Platform: c.Platform, ProjectID: c.ProjectID,
		MrIid: c.MRIID, Token: c.Token, ClaimedUntil: until, Now: now})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil // a live claim holds the MR
	}
	return err == nil, takenOver, err
}

// StatusNoteRenew implements store.StatusNoteQueries.
func (x executor) StatusNoteRenew(ctx context.Context, c store.NoteClaim, until time.Time) (bool, error) {
	n, err := queries.StatusNoteRenew(ctx, x.q, &dbsqlc.StatusNoteRenewParams{Platform: c.Platform, ProjectID: c.ProjectID,
		MrIid: c.MRIID, Token: c.Token, ClaimedUntil: until})
	return n == 1, err
}

// StatusNoteRelease implements store.StatusNoteQueries.
func (x executor) StatusNoteRelease(ctx context.Context, c store.NoteClaim) error {
	return queries.StatusNoteRelease(ctx, x.q, &dbsqlc.StatusNoteReleaseParams{Platform: c.Platform, ProjectID: c.ProjectID,
		MrIid: c.MRIID, Token: c.Token})
}

// StatusNoteCurrent implements store.StatusNoteQueries.
func (x executor) StatusNoteCurrent(ctx context.Context, id string) (store.NoteState, error) {
	r, err := queries.StatusNoteCurrent(ctx, x.q, id)
	if err != nil {
		return store.NoteState{}, noRows(err)
	}
	return store.NoteState{Platform: r.Platform, ProjectID: r.ProjectID, MRIID: r.MrIid, LastSeq: r.LastSeq,
		NoteOperationID: r.NoteOperationID, RenderedSeq: r.RenderedSeq}, nil
}
