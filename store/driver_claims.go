package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// GetStatusNote reads the status note of an MR; ErrNotFound (unwrapped)
// when none.
func (s *DriverStore) GetStatusNote(ctx context.Context, db DBTX, platform string, projectID, iid int64) (StatusNote, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return StatusNote{}, err
	}
	n, err := x.StatusNoteGet(ctx, PlatformOr(platform), projectID, iid)
	if errors.Is(err, ErrNotFound) {
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
func (s *DriverStore) SaveStatusNote(ctx context.Context, db DBTX, n StatusNote) (bool, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return false, err
	}
	n.Platform = PlatformOr(n.Platform)
	wrote, err := x.StatusNoteSave(ctx, n, s.Now())
	if err != nil {
		return false, fmt.Errorf("saving status note of !%d: %w", n.MRIID, err)
	}
	return wrote, nil
}

// ClaimStatusNote claims the status note of MR !iid of projectID until
// lease from now (store clock), with a new random token. ok is false, and
// nothing is written, while another claim on it is live. c.TakenOver tells
// whether it replaced an expired claim (NoteClaim.TakenOver). One
// statement on PostgreSQL; on SQLite two when there is a claim to replace.
func (s *DriverStore) ClaimStatusNote(ctx context.Context, platform string, projectID, iid int64, lease time.Duration) (c NoteClaim, ok bool, err error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return NoteClaim{}, false, fmt.Errorf("making a claim token: %w", err)
	}
	c = NoteClaim{Platform: PlatformOr(platform), ProjectID: projectID, MRIID: iid, Token: hex.EncodeToString(b)}
	x, err := s.d.Executor(s.d.DB())
	if err != nil {
		return NoteClaim{}, false, err
	}
	now := s.Now()
	ok, c.TakenOver, err = x.StatusNoteClaim(ctx, c, now.Add(lease), now)
	if err != nil {
		return NoteClaim{}, false, fmt.Errorf("claiming status note of !%d: %w", iid, err)
	}
	return c, ok, nil
}

// RenewStatusNote extends claim c until lease from now (store clock) while
// its refresh still writes to GitLab. ok is false when c expired and another
// refresh took the note over (or it was released): the caller must stop
// writing. One statement.
func (s *DriverStore) RenewStatusNote(ctx context.Context, c NoteClaim, lease time.Duration) (ok bool, err error) {
	x, err := s.d.Executor(s.d.DB())
	if err != nil {
		return false, err
	}
	c.Platform = PlatformOr(c.Platform)
	ok, err = x.StatusNoteRenew(ctx, c, s.Now().Add(lease))
	if err != nil {
		return false, fmt.Errorf("renewing status note claim of !%d: %w", c.MRIID, err)
	}
	return ok, nil
}

// RecordStatusNote records n (as SaveStatusNote: a newer render is never
// replaced) and releases claim c, in one transaction. It reports whether n
// was written.
func (s *DriverStore) RecordStatusNote(ctx context.Context, c NoteClaim, n StatusNote) (bool, error) {
	var wrote bool
	err := s.d.InTx(ctx, func(tx Tx) error {
		var err error
		if wrote, err = s.SaveStatusNote(ctx, tx, n); err != nil {
			return err
		}
		return s.ReleaseStatusNote(ctx, tx, c)
	})
	return wrote, err
}

// ReleaseStatusNote releases claim c (a no-op when it expired and another
// refresh took the note over).
func (s *DriverStore) ReleaseStatusNote(ctx context.Context, db DBTX, c NoteClaim) error {
	x, err := s.d.Executor(db)
	if err != nil {
		return err
	}
	c.Platform = PlatformOr(c.Platform)
	if err := x.StatusNoteRelease(ctx, c); err != nil {
		return fmt.Errorf("releasing status note claim of !%d: %w", c.MRIID, err)
	}
	return nil
}

// StatusNoteState reads operation id's MR, newest event and the MR's
// recorded status note in one statement (no transaction), so a refresh
// that finds the note current writes nothing; ErrNotFound (wrapped)
// without such an operation.
func (s *DriverStore) StatusNoteState(ctx context.Context, db DBTX, id string) (NoteState, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return NoteState{}, err
	}
	st, err := x.StatusNoteCurrent(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return NoteState{}, fmt.Errorf("status note state of %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return NoteState{}, fmt.Errorf("reading status note state of %s: %w", id, err)
	}
	return st, nil
}

// ClaimCommit writes claim c unless (c.RunID, c.Step) is claimed already;
// it returns the new claim's token (minted by the database: positive,
// never reused) and claimed=true, or claimed=false and writes nothing. A
// zero c.ClaimedAt is the database's clock (CommitClaimInsert). In a
// transaction (db a Tx) a concurrent claim of the same step waits until
// that transaction ends. One statement on PostgreSQL.
func (s *DriverStore) ClaimCommit(ctx context.Context, db DBTX, c CommitClaim) (token int64, claimed bool, err error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return 0, false, err
	}
	token, claimed, err = x.CommitClaimInsert(ctx, c)
	if err != nil {
		return 0, false, fmt.Errorf("inserting commit claim: %w", err)
	}
	if !claimed {
		return 0, false, nil
	}
	return token, true, nil
}

// SeedCommitClaim writes claim c unless (c.RunID, c.Step) is claimed
// already, in which case the existing claim is kept unchanged.
func (s *DriverStore) SeedCommitClaim(ctx context.Context, db DBTX, c CommitClaim) error {
	x, err := s.d.Executor(db)
	if err != nil {
		return err
	}
	if err := x.CommitClaimSeed(ctx, c); err != nil {
		return fmt.Errorf("seeding commit claim: %w", err)
	}
	return nil
}

// GetCommitClaim reads the claim of (runID, step); ErrNotFound (unwrapped)
// when there is none.
func (s *DriverStore) GetCommitClaim(ctx context.Context, db DBTX, runID, step string) (CommitClaim, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return CommitClaim{}, err
	}
	c, err := x.CommitClaimGet(ctx, runID, step)
	if errors.Is(err, ErrNotFound) {
		return CommitClaim{}, ErrNotFound
	}
	if err != nil {
		return CommitClaim{}, fmt.Errorf("reading commit claim: %w", err)
	}
	return c, nil
}

// ReleaseCommitClaim deletes the claim of (runID, step) only if it still
// carries token, and reports whether it did: a late or duplicate release
// never frees someone else's claim (DESIGN §6).
func (s *DriverStore) ReleaseCommitClaim(ctx context.Context, db DBTX, runID, step string, token int64) (bool, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return false, err
	}
	released, err := x.CommitClaimRelease(ctx, runID, step, token)
	if err != nil {
		return false, fmt.Errorf("deleting commit claim: %w", err)
	}
	return released, nil
}

// CountCommitClaims returns how many claims are held.
func (s *DriverStore) CountCommitClaims(ctx context.Context, db DBTX) (int, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return 0, err
	}
	n, err := x.CommitClaimCount(ctx)
	if err != nil {
		return 0, fmt.Errorf("counting commit claims: %w", err)
	}
	return int(n), nil
}
