// Package commitgate owns the exclusive terminal commit (DESIGN §6): for a
// side effect that must happen at most once per (run, step) across replicas,
// such as a merge or the validated flip, a Guard lets exactly one caller
// claim the step's terminal commit and tells every other caller who holds it.
//
// A claim carries a token minted by the store (a database sequence for the
// database store, DBStore). ReleaseLease frees a claim only when its token matches,
// so a late or duplicate release never frees someone else's claim. Seed
// refills the claims of steps whose terminal state was persisted before a
// restart. For fencing, a caller claims with DBStore.InTx inside the
// transaction that also writes the resulting state, so the claim and the
// state commit or roll back together.
//
// commitgate must not perform the side effects it guards, must not import
// bot, webhooks or commands, and must not decide which statuses are terminal
// (the caller injects that rule). The memory store exists for unit tests only.
//
// # Differences from the seed's contract
//
// The API follows the commitgate seed (NewGuard(isTerminal) over the
// in-process store, NewGuardWithStore(store, isTerminal), Acquire and
// ReleaseLease, Seed, Status, Committed, ErrEmptyRef, ErrAlreadyCommitted and
// AlreadyCommittedError carrying the previous and the refused commit), with
// these deliberate differences:
//   - Every method takes a context and returns an error, because the real
//     store is a database: a claim that could not be written must not look
//     like a claim that was refused, and a read that failed must not look
//     like "not committed".
//   - NewGuardWithStore(nil, …) does not fall back to the in-process store:
//     in a service with several replicas that would silently give each
//     replica its own gate. Its Guard answers ErrUnconfigured instead.
//   - Sequence numbers and tokens are int64 (PostgreSQL bigint), not uint64.
//   - ReleaseLease reports whether it released, so a caller can record it.
//   - Holder and TakeOver are additions: a claim whose holder died between
//     its claim and the guarded call (a replica killed mid-job) must not
//     block the step forever, so a caller that sees the side effect did not
//     happen may replace a claim older than its job timeout, by a delete
//     conditional on the holder's token (issue 10 point 7).
package commitgate

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrEmptyRef is returned when a Ref lacks its run id or its step; both are
// required because different runs' steps of the same name are different.
var ErrEmptyRef = errors.New("commit ref needs both a run id and a step")

// ErrUnconfigured is returned by every method of a Guard that was not built
// with NewGuard and a non-nil Store (the zero Guard is unusable, never
// permissive).
var ErrUnconfigured = errors.New("commit guard is not configured: build it with NewGuard and a store")

// ErrAlreadyCommitted matches, with errors.Is, the *AlreadyCommittedError
// returned when another caller already holds a step's terminal commit.
var ErrAlreadyCommitted = errors.New("step already committed")

// Ref names one step of one run: the unit that may commit at most once.
type Ref struct {
	// RunID identifies the run (the operation id); required.
	RunID string
	// Step names the step within the run (a persisted step name); required.
	Step string
}

// Validate returns ErrEmptyRef unless both RunID and Step are set.
func (r Ref) Validate() error {
	if r.RunID == "" || r.Step == "" {
		return ErrEmptyRef
	}
	return nil
}

// Commit is a terminal commit of a step: the status it ends in, the branch
// it concerns (empty when none) and the caller's sequence number (for
// example the operation's version) at which it happened.
type Commit struct {
	Ref    Ref
	Status string
	Branch string
	Seq    int64
}

// Lease is the proof of a successful Acquire. Token is positive for a claim
// held in the store; a zero Token means nothing was claimed (the commit was
// not terminal) and releasing it does nothing.
type Lease struct {
	Ref   Ref
	Token int64
}

// AlreadyCommittedError is returned by Acquire when the step's terminal
// commit is held by an earlier caller. Prev is that earlier commit (status,
// branch, seq: who won), Refused the commit that was turned away. It
// matches ErrAlreadyCommitted with errors.Is and unwraps to it.
type AlreadyCommittedError struct {
	Ref     Ref
	Prev    Commit
	Refused Commit
}

// Error names both sides, for example
// `step "merge" of run "op_1" already committed as MERGED on branch main at seq 7; refused MERGED on branch main at seq 8`.
func (e *AlreadyCommittedError) Error() string {
	return fmt.Sprintf("step %q of run %q already committed as %s; refused %s",
		e.Ref.Step, e.Ref.RunID, describe(e.Prev), describe(e.Refused))
}

func describe(c Commit) string {
	branch := ""
	if c.Branch != "" {
		branch = " on branch " + c.Branch
	}
	return fmt.Sprintf("%s%s at seq %d", c.Status, branch, c.Seq)
}

// Unwrap returns ErrAlreadyCommitted, so errors.Is matches it.
func (e *AlreadyCommittedError) Unwrap() error { return ErrAlreadyCommitted }

// Store keeps the claims behind a Guard. Implementations: NewDBStore
// (production) and NewMemoryStore (unit tests only). The Guard validates refs
// and statuses before calling a Store.
type Store interface {
	// Claim atomically records c unless c.Ref is already claimed. On success
	// it returns a fresh positive token and claimed=true; otherwise it returns
	// the current holder and claimed=false.
	Claim(ctx context.Context, c Commit) (token int64, holder Commit, claimed bool, err error)
	// ReleaseToken deletes ref's claim only if it still carries token, and
	// reports whether it did.
	ReleaseToken(ctx context.Context, ref Ref, token int64) (bool, error)
	// SeedIfAbsent records c unless c.Ref is already claimed, in which case
	// the existing record is kept unchanged.
	SeedIfAbsent(ctx context.Context, c Commit) error
	// Get returns ref's claim and whether there is one.
	Get(ctx context.Context, ref Ref) (Commit, bool, error)
	// Count returns the number of claims held.
	Count(ctx context.Context) (int, error)
	// Held returns ref's claim with its token and when it was claimed, and
	// whether there is one (for TakeOver).
	Held(ctx context.Context, ref Ref) (Held, bool, error)
}

// Held is a claim as the store holds it: the commit, the token that can
// release it, and when it was claimed (the store's clock).
type Held struct {
	Commit    Commit
	Token     int64
	ClaimedAt time.Time
}

// Guard grants the exclusive terminal commit of each (run, step). Build it
// with NewGuard or NewGuardWithStore; the zero Guard returns ErrUnconfigured
// from every method. A Guard is safe for concurrent use when its Store is.
type Guard struct {
	store      Store
	isTerminal func(status string) bool
}

// NewGuard returns a Guard over a new in-process MemoryStore: exclusive
// within this process only, for tests and single-process tools. isTerminal
// tells which statuses are terminal and therefore claimed; nil means every
// status is terminal.
func NewGuard(isTerminal func(status string) bool) *Guard {
	return NewGuardWithStore(NewMemoryStore(), isTerminal)
}

// NewGuardWithStore returns a Guard over store, such as NewDBStore for
// a gate shared by every replica. A nil store yields a Guard whose methods
// return ErrUnconfigured (never a silent per-process gate).
func NewGuardWithStore(store Store, isTerminal func(status string) bool) *Guard {
	return &Guard{store: store, isTerminal: isTerminal}
}

func (g *Guard) usable() error {
	if g == nil || g.store == nil {
		return ErrUnconfigured
	}
	return nil
}

func (g *Guard) terminal(status string) bool {
	return g.isTerminal == nil || g.isTerminal(status)
}

// Acquire claims c's step for c. A non-terminal commit passes: it returns a
// Lease with a zero Token and nil error and leaves no record. If another
// caller already holds the step, Acquire returns *AlreadyCommittedError
// naming that holder. Errors: ErrUnconfigured, ErrEmptyRef, or the store's.
func (g *Guard) Acquire(ctx context.Context, c Commit) (Lease, error) {
	if err := g.usable(); err != nil {
		return Lease{}, err
	}
	if err := c.Ref.Validate(); err != nil {
		return Lease{}, err
	}
	if !g.terminal(c.Status) {
		return Lease{Ref: c.Ref}, nil
	}
	token, holder, claimed, err := g.store.Claim(ctx, c)
	if err != nil {
		return Lease{}, fmt.Errorf("claiming step %q of run %q: %w", c.Ref.Step, c.Ref.RunID, err)
	}
	if !claimed {
		return Lease{}, &AlreadyCommittedError{Ref: c.Ref, Prev: holder, Refused: c}
	}
	if token <= 0 {
		return Lease{}, fmt.Errorf("claiming step %q of run %q: store returned non-positive token %d", c.Ref.Step, c.Ref.RunID, token)
	}
	return Lease{Ref: c.Ref, Token: token}, nil
}

// ReleaseLease frees l's claim only if the store still holds it under
// l.Token, and reports whether it did; a late, duplicate or zero-token
// release does nothing and returns false. Release a claim only when the
// guarded side effect is known not to have happened, so it may be retried.
func (g *Guard) ReleaseLease(ctx context.Context, l Lease) (released bool, err error) {
	if err := g.usable(); err != nil {
		return false, err
	}
	if err := l.Ref.Validate(); err != nil {
		return false, err
	}
	if l.Token <= 0 {
		return false, nil
	}
	released, err = g.store.ReleaseToken(ctx, l.Ref, l.Token)
	if err != nil {
		return false, fmt.Errorf("releasing step %q of run %q: %w", l.Ref.Step, l.Ref.RunID, err)
	}
	return released, nil
}

// Seed records c as committed when its step has no claim yet, to refill the
// gate from terminal states persisted before a restart. It is idempotent,
// never replaces an existing (newer) record, and ignores non-terminal
// commits. Seeded claims have a token nobody holds, so they are never
// released. Errors: ErrUnconfigured, ErrEmptyRef, or the store's.
func (g *Guard) Seed(ctx context.Context, c Commit) error {
	if err := g.usable(); err != nil {
		return err
	}
	if err := c.Ref.Validate(); err != nil {
		return err
	}
	if !g.terminal(c.Status) {
		return nil
	}
	if err := g.store.SeedIfAbsent(ctx, c); err != nil {
		return fmt.Errorf("seeding step %q of run %q: %w", c.Ref.Step, c.Ref.RunID, err)
	}
	return nil
}

// Status returns the commit holding ref and whether there is one.
// Errors: ErrUnconfigured, ErrEmptyRef, or the store's.
func (g *Guard) Status(ctx context.Context, ref Ref) (Commit, bool, error) {
	if err := g.usable(); err != nil {
		return Commit{}, false, err
	}
	if err := ref.Validate(); err != nil {
		return Commit{}, false, err
	}
	c, ok, err := g.store.Get(ctx, ref)
	if err != nil {
		return Commit{}, false, fmt.Errorf("reading step %q of run %q: %w", ref.Step, ref.RunID, err)
	}
	return c, ok, nil
}

// Holder returns the claim holding ref, with its token and when it was
// claimed, and whether there is one: what a caller that lost the claim
// reads to decide whether the holder is presumed dead (TakeOver).
// Errors: ErrUnconfigured, ErrEmptyRef, or the store's.
func (g *Guard) Holder(ctx context.Context, ref Ref) (Held, bool, error) {
	if err := g.usable(); err != nil {
		return Held{}, false, err
	}
	if err := ref.Validate(); err != nil {
		return Held{}, false, err
	}
	h, ok, err := g.store.Held(ctx, ref)
	if err != nil {
		return Held{}, false, fmt.Errorf("reading the claim of step %q of run %q: %w", ref.Step, ref.RunID, err)
	}
	return h, ok, nil
}

// TakeOver claims c's step in place of stale, a claim whose holder the
// caller presumes dead (for example a claim older than the job timeout,
// left by a replica that died between its claim and the guarded call, which
// would otherwise block the step forever). It deletes the claim only if it
// still carries stale.Token, a conditional delete, so a holder that has
// since released and someone else's newer claim are never displaced, then
// claims c as Acquire does: when another caller claimed first, it returns
// *AlreadyCommittedError naming it. The caller must know that the guarded
// side effect did not happen under stale (for a merge: GitLab shows the
// merge request open). Errors: ErrUnconfigured, ErrEmptyRef, an error when
// stale and c name different steps, or the store's.
func (g *Guard) TakeOver(ctx context.Context, stale Held, c Commit) (Lease, error) {
	if err := g.usable(); err != nil {
		return Lease{}, err
	}
	if err := c.Ref.Validate(); err != nil {
		return Lease{}, err
	}
	if stale.Commit.Ref != c.Ref {
		return Lease{}, fmt.Errorf("taking over step %q of run %q with a claim of step %q of run %q",
			c.Ref.Step, c.Ref.RunID, stale.Commit.Ref.Step, stale.Commit.Ref.RunID)
	}
	if _, err := g.ReleaseLease(ctx, Lease{Ref: stale.Commit.Ref, Token: stale.Token}); err != nil {
		return Lease{}, fmt.Errorf("taking over: %w", err)
	}
	return g.Acquire(ctx, c)
}

// Committed returns the number of steps currently committed.
// Errors: ErrUnconfigured or the store's.
func (g *Guard) Committed(ctx context.Context) (int, error) {
	if err := g.usable(); err != nil {
		return 0, err
	}
	n, err := g.store.Count(ctx)
	if err != nil {
		return 0, fmt.Errorf("counting commits: %w", err)
	}
	return n, nil
}
