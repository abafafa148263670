package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"changebot/store"
	"changebot/store/sqlite/internal/dbsqlc"
	"changebot/store/sqlite/internal/dbtime"
)

// GetStatusNote implements store.StatusNotes.
func (s *Store) GetStatusNote(ctx context.Context, db store.DBTX, platform string, projectID, iid int64) (store.StatusNote, error) {
	g, err := q(db).gen()
	if err != nil {
		return store.StatusNote{}, err
	}
	r, err := queries.StatusNoteGet(ctx, g, &dbsqlc.StatusNoteGetParams{Platform: store.PlatformOr(platform), ProjectID: projectID, MrIid: iid})
	if errors.Is(err, sql.ErrNoRows) {
		return store.StatusNote{}, store.ErrNotFound
	}
	if err != nil {
		return store.StatusNote{}, fmt.Errorf("reading status note of !%d: %w", iid, err)
	}
	return store.StatusNote{Platform: r.Platform, ProjectID: r.ProjectID, MRIID: r.MrIid, NoteID: r.NoteID, OperationID: r.OperationID,
		RenderedSeq: r.RenderedSeq}, nil
}

// SaveStatusNote implements store.StatusNotes.
func (s *Store) SaveStatusNote(ctx context.Context, db store.DBTX, n store.StatusNote) (bool, error) {
	g, err := q(db).gen()
	if err != nil {
		return false, err
	}
	k, err := queries.StatusNoteSave(ctx, g, &dbsqlc.StatusNoteSaveParams{Platform: store.PlatformOr(n.Platform), ProjectID: n.ProjectID, MrIid: n.MRIID,
		NoteID: n.NoteID, OperationID: n.OperationID, RenderedSeq: n.RenderedSeq, UpdatedAt: dbtime.Of(s.Now())})
	if err != nil {
		return false, fmt.Errorf("saving status note of !%d: %w", n.MRIID, err)
	}
	return k > 0, nil
}

// ClaimStatusNote implements store.StatusNotes.
func (s *Store) ClaimStatusNote(ctx context.Context, platform string, projectID, iid int64, lease time.Duration) (c store.NoteClaim, ok bool, err error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return store.NoteClaim{}, false, fmt.Errorf("making a claim token: %w", err)
	}
	c = store.NoteClaim{Platform: store.PlatformOr(platform), ProjectID: projectID, MRIID: iid, Token: hex.EncodeToString(b)}
	now := s.Now()
	// Hand-written: sqlc v1.31.1's SQLite engine leaves a parameter in an
	// upsert's DO UPDATE ... WHERE clause unbound (it stays "@now" in the
	// generated statement), so this one statement is not generated.
	res, err := q(s.DB()).Exec(ctx, `INSERT INTO status_note_claims (platform, project_id, mr_iid, token, claimed_until)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (platform, project_id, mr_iid) DO UPDATE SET token = excluded.token, claimed_until = excluded.claimed_until
		WHERE status_note_claims.claimed_until <= ?`, c.Platform, projectID, iid, c.Token, now.Add(lease), now)
	if err != nil {
		return store.NoteClaim{}, false, fmt.Errorf("claiming status note of !%d: %w", iid, err)
	}
	n, _ := res.RowsAffected()
	return c, n == 1, nil
}

// RenewStatusNote implements store.StatusNotes.
func (s *Store) RenewStatusNote(ctx context.Context, c store.NoteClaim, lease time.Duration) (ok bool, err error) {
	n, err := queries.StatusNoteRenew(ctx, s.db, &dbsqlc.StatusNoteRenewParams{Platform: store.PlatformOr(c.Platform), ProjectID: c.ProjectID, MrIid: c.MRIID,
		Token: c.Token, ClaimedUntil: dbtime.Of(s.Now().Add(lease))})
	if err != nil {
		return false, fmt.Errorf("renewing status note claim of !%d: %w", c.MRIID, err)
	}
	return n == 1, nil
}

// RecordStatusNote implements store.StatusNotes.
func (s *Store) RecordStatusNote(ctx context.Context, c store.NoteClaim, n store.StatusNote) (bool, error) {
	var wrote bool
	err := s.InTx(ctx, func(tx store.Tx) error {
		var err error
		if wrote, err = s.SaveStatusNote(ctx, tx, n); err != nil {
			return err
		}
		return s.ReleaseStatusNote(ctx, tx, c)
	})
	return wrote, err
}

// ReleaseStatusNote implements store.StatusNotes.
func (s *Store) ReleaseStatusNote(ctx context.Context, db store.DBTX, c store.NoteClaim) error {
	g, err := q(db).gen()
	if err != nil {
		return err
	}
	if err := queries.StatusNoteRelease(ctx, g, &dbsqlc.StatusNoteReleaseParams{Platform: store.PlatformOr(c.Platform), ProjectID: c.ProjectID, MrIid: c.MRIID, Token: c.Token}); err != nil {
		return fmt.Errorf("releasing status note claim of !%d: %w", c.MRIID, err)
	}
	return nil
}

// stamp is the claimed_at to write: c's, or the store clock's.
func (s *Store) stamp(c store.CommitClaim) time.Time {
	if c.ClaimedAt.IsZero() {
		return s.Now()
	}
	return c.ClaimedAt
}

// ClaimCommit implements store.CommitClaims. The token is minted first
// (an AUTOINCREMENT row, never reused); a refused claim burns it, as
// PostgreSQL's nextval does.
func (s *Store) ClaimCommit(ctx context.Context, db store.DBTX, c store.CommitClaim) (token int64, claimed bool, err error) {
	g, err := q(db).gen()
	if err != nil {
		return 0, false, err
	}
	minted, err := queries.CommitClaimTokenMint(ctx, g)
	if err != nil {
		return 0, false, fmt.Errorf("minting a commit claim token: %w", err)
	}
	n, err := queries.CommitClaimInsert(ctx, g, &dbsqlc.CommitClaimInsertParams{RunID: c.RunID, Step: c.Step,
		Status: c.Status, Branch: c.Branch, Seq: c.Seq, Token: minted, ClaimedAt: dbtime.Of(s.stamp(c))})
	if err != nil {
		return 0, false, fmt.Errorf("inserting commit claim: %w", err)
	}
	if n == 0 {
		return 0, false, nil
	}
	return minted, true, nil
}

// SeedCommitClaim implements store.CommitClaims.
func (s *Store) SeedCommitClaim(ctx context.Context, db store.DBTX, c store.CommitClaim) error {
	g, err := q(db).gen()
	if err != nil {
		return err
	}
	minted, err := queries.CommitClaimTokenMint(ctx, g)
	if err != nil {
		return fmt.Errorf("minting a commit claim token: %w", err)
	}
	if _, err := queries.CommitClaimInsert(ctx, g, &dbsqlc.CommitClaimInsertParams{RunID: c.RunID, Step: c.Step,
		Status: c.Status, Branch: c.Branch, Seq: c.Seq, Token: minted, ClaimedAt: dbtime.Of(s.stamp(c))}); err != nil {
		return fmt.Errorf("seeding commit claim: %w", err)
	}
	return nil
}

// GetCommitClaim implements store.CommitClaims.
func (s *Store) GetCommitClaim(ctx context.Context, db store.DBTX, runID, step string) (store.CommitClaim, error) {
	g, err := q(db).gen()
	if err != nil {
		return store.CommitClaim{}, err
	}
	r, err := queries.CommitClaimGet(ctx, g, &dbsqlc.CommitClaimGetParams{RunID: runID, Step: step})
	if errors.Is(err, sql.ErrNoRows) {
		return store.CommitClaim{}, store.ErrNotFound
	}
	if err != nil {
		return store.CommitClaim{}, fmt.Errorf("reading commit claim: %w", err)
	}
	return store.CommitClaim{RunID: r.RunID, Step: r.Step, Status: r.Status, Branch: r.Branch, Seq: r.Seq,
		Token: r.Token, ClaimedAt: r.ClaimedAt.Time}, nil
}

// ReleaseCommitClaim implements store.CommitClaims.
func (s *Store) ReleaseCommitClaim(ctx context.Context, db store.DBTX, runID, step string, token int64) (bool, error) {
	g, err := q(db).gen()
	if err != nil {
		return false, err
	}
	n, err := queries.CommitClaimRelease(ctx, g, &dbsqlc.CommitClaimReleaseParams{RunID: runID, Step: step, Token: token})
	if err != nil {
		return false, fmt.Errorf("deleting commit claim: %w", err)
	}
	return n == 1, nil
}

// CountCommitClaims implements store.CommitClaims.
func (s *Store) CountCommitClaims(ctx context.Context, db store.DBTX) (int, error) {
	g, err := q(db).gen()
	if err != nil {
		return 0, err
	}
	n, err := queries.CommitClaimCount(ctx, g)
	if err != nil {
		return 0, fmt.Errorf("counting commit claims: %w", err)
	}
	return int(n), nil
}

// ListSettings implements store.Settings.
func (s *Store) ListSettings(ctx context.Context, db store.DBTX) ([]store.Setting, error) {
	g, err := q(db).gen()
	if err != nil {
		return nil, err
	}
	return listSettings(ctx, g)
}

// listSettings is ListSettings on db (the database or a transaction).
func listSettings(ctx context.Context, db dbsqlc.DBTX) ([]store.Setting, error) {
	rows, err := queries.SettingList(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("listing settings: %w", err)
	}
	var out []store.Setting
	for _, r := range rows {
		out = append(out, store.Setting{Key: r.Key, Scope: r.Scope, Value: json.RawMessage(r.Value),
			UpdatedBy: r.UpdatedBy, UpdatedAt: r.UpdatedAt.Time})
	}
	return out, nil
}

// SaveSetting implements store.Settings. The transaction holds the write
// lock (BEGIN IMMEDIATE), so the audit's old value is exact and p.Check sees
// the stored settings as no other write can change them before this one; the change is announced to this
// process's listeners once committed (one process owns a SQLite file).
func (s *Store) SaveSetting(ctx context.Context, p store.SaveSettingParams) (store.Setting, error) {
	if p.Key == "" || p.Scope == "" || p.UpdatedBy == "" {
		return store.Setting{}, errors.New("saving setting: key, scope and updated_by are required")
	}
	now := s.Now()
	saved := store.Setting{Key: p.Key, Scope: p.Scope, UpdatedBy: p.UpdatedBy, UpdatedAt: now}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if p.Check != nil {
			stored, err := listSettings(ctx, tx)
			if err != nil {
				return err
			}
			if err := p.Check(stored); err != nil {
				return err
			}
		}
		old, err := queries.SettingValue(ctx, tx, &dbsqlc.SettingValueParams{Key: p.Key, Scope: p.Scope})
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var newValue *string
		if p.Value == nil {
			if err := queries.SettingDelete(ctx, tx, &dbsqlc.SettingDeleteParams{Key: p.Key, Scope: p.Scope}); err != nil {
				return err
			}
		} else {
			v, err := queries.SettingUpsert(ctx, tx, &dbsqlc.SettingUpsertParams{Key: p.Key, Scope: p.Scope,
				Value: string(p.Value), UpdatedBy: p.UpdatedBy, UpdatedAt: dbtime.Of(now)})
			if err != nil {
				return err
			}
			saved.Value, newValue = json.RawMessage(v), &v
		}
		var oldValue *string
		if old != "" {
			oldValue = &old
		}
		return queries.SettingAuditInsert(ctx, tx, &dbsqlc.SettingAuditInsertParams{Key: p.Key, Scope: p.Scope,
			OldValue: oldValue, NewValue: newValue, UpdatedBy: p.UpdatedBy, UpdatedAt: dbtime.Of(now)})
	})
	if err != nil {
		return store.Setting{}, fmt.Errorf("saving setting %s (%s): %w", p.Key, p.Scope, err)
	}
	s.hub.announce(store.SettingsNotice{Key: p.Key, Scope: p.Scope})
	return saved, nil
}

// ListSettingAudit implements store.Settings.
func (s *Store) ListSettingAudit(ctx context.Context, db store.DBTX, key, scope string) ([]store.SettingAudit, error) {
	g, err := q(db).gen()
	if err != nil {
		return nil, err
	}
	rows, err := queries.SettingAuditList(ctx, g, &dbsqlc.SettingAuditListParams{Key: key, Scope: scope})
	if err != nil {
		return nil, fmt.Errorf("listing audit of setting %s: %w", key, err)
	}
	var out []store.SettingAudit
	for _, r := range rows {
		a := store.SettingAudit{ID: r.ID, Key: r.Key, Scope: r.Scope, UpdatedBy: r.UpdatedBy, UpdatedAt: r.UpdatedAt.Time}
		if r.OldValue != nil {
			a.OldValue = json.RawMessage(*r.OldValue)
		}
		if r.NewValue != nil {
			a.NewValue = json.RawMessage(*r.NewValue)
		}
		out = append(out, a)
	}
	return out, nil
}

// StatusNoteState implements store.StatusNotes: one statement.
func (s *Store) StatusNoteState(ctx context.Context, db store.DBTX, id string) (store.NoteState, error) {
	g, err := q(db).gen()
	if err != nil {
		return store.NoteState{}, err
	}
	r, err := queries.StatusNoteCurrent(ctx, g, id)
	if errors.Is(err, sql.ErrNoRows) {
		return store.NoteState{}, fmt.Errorf("status note state of %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.NoteState{}, fmt.Errorf("reading status note state of %s: %w", id, err)
	}
	return store.NoteState{Platform: r.Platform, ProjectID: r.ProjectID, MRIID: r.MrIid, LastSeq: r.LastSeq,
		NoteOperationID: r.NoteOperationID, RenderedSeq: r.RenderedSeq}, nil
}
