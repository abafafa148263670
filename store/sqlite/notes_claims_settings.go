package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"changebot/store"
	"changebot/store/sqlite/internal/dbsqlc"
	"changebot/store/sqlite/internal/dbtime"
)

// StatusNoteClaim implements store.StatusNoteQueries.
func (x executor) StatusNoteClaim(ctx context.Context, c store.NoteClaim, until, now time.Time) (claimed, takenOver bool, err error) {
	// Hand-written: sqlc v1.31.1's SQLite engine leaves a parameter in an
	// upsert's DO UPDATE ... WHERE clause unbound (it stays "@now" in the
	// generated statement). SQLite has no way to tell an upsert's insert
	// from its update, so a free MR is claimed by the insert and an
	// expired claim replaced by the update (one writer at a time: nothing
	// comes between them that matters).
	n, err := affected(x.exec(ctx, `INSERT INTO status_note_claims (platform, project_id, mr_iid, token, claimed_until)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (platform, project_id, mr_iid) DO NOTHING`,
		c.Platform, c.ProjectID, c.MRIID, c.Token, until))
	if err != nil || n == 1 {
		return n == 1, false, err
	}
	n, err = affected(x.exec(ctx, `UPDATE status_note_claims SET token = ?, claimed_until = ?
		WHERE platform = ? AND project_id = ? AND mr_iid = ? AND claimed_until <= ?`,
		c.Token, until, c.Platform, c.ProjectID, c.MRIID, now))
	return n == 1, n == 1, err
}

// StatusNoteGet implements store.StatusNoteQueries.
func (x executor) StatusNoteGet(ctx context.Context, platform string, projectID, iid int64) (store.StatusNote, error) {
	r, err := queries.StatusNoteGet(ctx, x.ex, &dbsqlc.StatusNoteGetParams{Platform: platform, ProjectID: projectID, MrIid: iid})
	if err != nil {
		return store.StatusNote{}, noRows(err)
	}
	return store.StatusNote{Platform: r.Platform, ProjectID: r.ProjectID, MRIID: r.MrIid, NoteID: r.NoteID,
		OperationID: r.OperationID, RenderedSeq: r.RenderedSeq}, nil
}

// StatusNoteSave implements store.StatusNoteQueries.
func (x executor) StatusNoteSave(ctx context.Context, n store.StatusNote, at time.Time) (bool, error) {
	k, err := queries.StatusNoteSave(ctx, x.ex, &dbsqlc.StatusNoteSaveParams{Platform: n.Platform,
		ProjectID: n.ProjectID, MrIid: n.MRIID, NoteID: n.NoteID, OperationID: n.OperationID,
		RenderedSeq: n.RenderedSeq, UpdatedAt: dbtime.Of(at)})
	return k > 0, err
}

// StatusNoteRenew implements store.StatusNoteQueries.
func (x executor) StatusNoteRenew(ctx context.Context, c store.NoteClaim, until time.Time) (bool, error) {
	n, err := queries.StatusNoteRenew(ctx, x.ex, &dbsqlc.StatusNoteRenewParams{Platform: c.Platform,
		ProjectID: c.ProjectID, MrIid: c.MRIID, Token: c.Token, ClaimedUntil: dbtime.Of(until)})
	return n == 1, err
}

// StatusNoteRelease implements store.StatusNoteQueries.
func (x executor) StatusNoteRelease(ctx context.Context, c store.NoteClaim) error {
	return queries.StatusNoteRelease(ctx, x.ex, &dbsqlc.StatusNoteReleaseParams{Platform: c.Platform,
		ProjectID: c.ProjectID, MrIid: c.MRIID, Token: c.Token})
}

// StatusNoteCurrent implements store.StatusNoteQueries.
func (x executor) StatusNoteCurrent(ctx context.Context, id string) (store.NoteState, error) {
	r, err := queries.StatusNoteCurrent(ctx, x.ex, id)
	if err != nil {
		return store.NoteState{}, noRows(err)
	}
	return store.NoteState{Platform: r.Platform, ProjectID: r.ProjectID, MRIID: r.MrIid, LastSeq: r.LastSeq,
		NoteOperationID: r.NoteOperationID, RenderedSeq: r.RenderedSeq}, nil
}

// claimInsert writes claim c with a token minted first (an AUTOINCREMENT
// row of commit_claim_tokens, never reused; a refused claim burns it, as
// PostgreSQL's nextval does), stamped c.ClaimedAt or, when zero, the
// driver's clock (SQLite's stands for the database's).
func (x executor) claimInsert(ctx context.Context, c store.CommitClaim) (token int64, claimed bool, err error) {
	token, err = queries.CommitClaimTokenMint(ctx, x.ex)
	if err != nil {
		return 0, false, err
	}
	at := c.ClaimedAt
	if at.IsZero() {
		at = x.d.now()
	}
	n, err := queries.CommitClaimInsert(ctx, x.ex, &dbsqlc.CommitClaimInsertParams{RunID: c.RunID, Step: c.Step,
		Status: c.Status, Branch: c.Branch, Seq: c.Seq, Token: token, ClaimedAt: dbtime.Of(at)})
	return token, n == 1, err
}

// CommitClaimInsert implements store.CommitClaimQueries (claimInsert).
func (x executor) CommitClaimInsert(ctx context.Context, c store.CommitClaim) (int64, bool, error) {
	return x.claimInsert(ctx, c)
}

// CommitClaimSeed implements store.CommitClaimQueries (claimInsert).
func (x executor) CommitClaimSeed(ctx context.Context, c store.CommitClaim) error {
	_, _, err := x.claimInsert(ctx, c)
	return err
}

// CommitClaimGet implements store.CommitClaimQueries.
func (x executor) CommitClaimGet(ctx context.Context, runID, step string) (store.CommitClaim, error) {
	r, err := queries.CommitClaimGet(ctx, x.ex, &dbsqlc.CommitClaimGetParams{RunID: runID, Step: step})
	if err != nil {
		return store.CommitClaim{}, noRows(err)
	}
	return store.CommitClaim{RunID: r.RunID, Step: r.Step, Status: r.Status, Branch: r.Branch, Seq: r.Seq,
		Token: r.Token, ClaimedAt: r.ClaimedAt.Time}, nil
}

// CommitClaimRelease implements store.CommitClaimQueries.
func (x executor) CommitClaimRelease(ctx context.Context, runID, step string, token int64) (bool, error) {
	n, err := queries.CommitClaimRelease(ctx, x.ex, &dbsqlc.CommitClaimReleaseParams{RunID: runID, Step: step, Token: token})
	return n == 1, err
}

// CommitClaimCount implements store.CommitClaimQueries.
func (x executor) CommitClaimCount(ctx context.Context) (int64, error) {
	return queries.CommitClaimCount(ctx, x.ex)
}

// SettingList implements store.SettingQueries.
func (x executor) SettingList(ctx context.Context) ([]store.Setting, error) {
	rows, err := queries.SettingList(ctx, x.ex)
	return convert(rows, err, func(r dbsqlc.Settings) store.Setting {
		return store.Setting{Key: r.Key, Scope: r.Scope, Value: json.RawMessage(r.Value), UpdatedBy: r.UpdatedBy,
			UpdatedAt: r.UpdatedAt.Time}
	})
}

// SettingValue implements store.SettingQueries.
func (x executor) SettingValue(ctx context.Context, key, scope string) (json.RawMessage, error) {
	v, err := queries.SettingValue(ctx, x.ex, &dbsqlc.SettingValueParams{Key: key, Scope: scope})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil || v == "" {
		return nil, err
	}
	return json.RawMessage(v), nil
}

// SettingUpsert implements store.SettingQueries: the value as TEXT.
func (x executor) SettingUpsert(ctx context.Context, st store.Setting) (json.RawMessage, error) {
	v, err := queries.SettingUpsert(ctx, x.ex, &dbsqlc.SettingUpsertParams{Key: st.Key, Scope: st.Scope,
		Value: string(st.Value), UpdatedBy: st.UpdatedBy, UpdatedAt: dbtime.Of(st.UpdatedAt)})
	return json.RawMessage(v), err
}

// SettingDelete implements store.SettingQueries.
func (x executor) SettingDelete(ctx context.Context, key, scope string) error {
	return queries.SettingDelete(ctx, x.ex, &dbsqlc.SettingDeleteParams{Key: key, Scope: scope})
}

// text is b as a nullable TEXT (nil for nil).
func text(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// SettingAuditInsert implements store.SettingQueries.
func (x executor) SettingAuditInsert(ctx context.Context, a store.SettingAudit) error {
	return queries.SettingAuditInsert(ctx, x.ex, &dbsqlc.SettingAuditInsertParams{Key: a.Key, Scope: a.Scope,
		OldValue: text(a.OldValue), NewValue: text(a.NewValue), UpdatedBy: a.UpdatedBy, UpdatedAt: dbtime.Of(a.UpdatedAt)})
}

// SettingAuditList implements store.SettingQueries.
func (x executor) SettingAuditList(ctx context.Context, key, scope string) ([]store.SettingAudit, error) {
	rows, err := queries.SettingAuditList(ctx, x.ex, &dbsqlc.SettingAuditListParams{Key: key, Scope: scope})
	return convert(rows, err, func(r dbsqlc.SettingsAudit) store.SettingAudit {
		a := store.SettingAudit{ID: r.ID, Key: r.Key, Scope: r.Scope, UpdatedBy: r.UpdatedBy, UpdatedAt: r.UpdatedAt.Time}
		if r.OldValue != nil {
			a.OldValue = json.RawMessage(*r.OldValue)
		}
		if r.NewValue != nil {
			a.NewValue = json.RawMessage(*r.NewValue)
		}
		return a
	})
}

// SettingsNotify implements store.SettingQueries: the listeners of this
// database in this process hear of it once the transaction committed (one
// process owns a SQLite file).
func (x executor) SettingsNotify(_ context.Context, key, scope string) error {
	hub := x.d.hub
	x.afterCommit(func() { hub.announce(store.SettingsNotice{Key: key, Scope: scope}) })
	return nil
}
