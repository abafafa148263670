package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// InsertDelivery stores d and enqueues the job that processes it, in one
// transaction (InsertDeliveries of one delivery). job receives the new
// delivery id. inserted is false (and nothing is written or enqueued) when
// the dedupe key was seen before.
func (s *DriverStore) InsertDelivery(ctx context.Context, d Delivery, job func(id int64) river.InsertManyParams) (id int64, inserted bool, err error) {
	out, err := s.InsertDeliveries(ctx, []Delivery{d}, job)
	if err != nil {
		return 0, false, err
	}
	return out[0].ID, out[0].Inserted, nil
}

// InsertDeliveries stores the deliveries of ds whose dedupe key is new with
// one statement (DeliveryInsertMany), and enqueues job(id) for each one
// stored with one River InsertManyTx, in one transaction (stored
// dispatched). out[i] answers ds[i]; a later copy of a key within ds is a
// duplicate of the first (FirstOfKey). On an error nothing is stored or
// enqueued, unless the error is the commit's answer being lost (a resend
// then answers duplicate). The webhook intake stores through it on SQLite:
// one writer and no network round trip, so the transaction costs what one
// autocommit INSERT would (BENCHMARKS.md, intake).
func (s *DriverStore) InsertDeliveries(ctx context.Context, ds []Delivery, job func(id int64) river.InsertManyParams) ([]DeliveryInsert, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	var out []DeliveryInsert
	err := s.inTx(ctx, func(_ Tx, x Executor) error {
		var ids []int64
		var err error
		out, ids, err = s.insertDeliveries(ctx, x, ds, true)
		if err != nil {
			return err
		}
		jobs := make([]river.InsertManyParams, 0, len(ids))
		for _, id := range ids {
			jobs = append(jobs, job(id))
		}
		return enqueue(ctx, x, jobs)
	})
	if err != nil {
		return nil, fmt.Errorf("storing %d deliveries (%s first): %w", len(ds), ds[0].Event, err)
	}
	return out, nil
}

// StoreDeliveries stores the deliveries of ds whose dedupe key is new with
// one autocommit statement on the store's own handle: one durable round
// trip, the webhook intake's request path on PostgreSQL (issue 12). Their
// jobs are not enqueued: DispatchDeliveries does that (dispatched_at NULL
// until then, migration 0018). out[i] answers ds[i] as InsertDeliveries'
// does; on an error nothing is stored, unless the error is the commit's
// answer being lost (a resend then answers duplicate).
func (s *DriverStore) StoreDeliveries(ctx context.Context, ds []Delivery) ([]DeliveryInsert, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	x, err := s.d.Executor(s.d.DB())
	if err != nil {
		return nil, err
	}
	out, _, err := s.insertDeliveries(ctx, x, ds, false)
	if err != nil {
		return nil, fmt.Errorf("storing %d deliveries (%s first): %w", len(ds), ds[0].Event, err)
	}
	return out, nil
}

// insertDeliveries stores the first delivery of each dedupe key of ds
// (FirstOfKey) whose key is new, with one statement on x, and answers each
// delivery; it also returns the ids stored, in ds's order.
func (s *DriverStore) insertDeliveries(ctx context.Context, x Executor, ds []Delivery, dispatched bool) ([]DeliveryInsert, []int64, error) {
	first := FirstOfKey(ds)
	firsts := make([]Delivery, 0, len(ds))
	for i, d := range ds {
		if first[i] == i {
			firsts = append(firsts, d)
		}
	}
	ids, err := x.DeliveryInsertMany(ctx, firsts, s.Now(), dispatched)
	if err != nil {
		return nil, nil, fmt.Errorf("inserting %d deliveries: %w", len(firsts), err)
	}
	out := make([]DeliveryInsert, len(ds))
	stored := make([]int64, 0, len(ids))
	for i, d := range ds {
		if id, ok := ids[d.DedupeKey]; ok && first[i] == i {
			out[i] = DeliveryInsert{ID: id, Inserted: true}
			stored = append(stored, id)
		}
	}
	return out, stored, nil
}

// DispatchDeliveries enqueues job(id) for at most max stored deliveries
// whose jobs are not enqueued yet (StoreDeliveries), oldest first, and
// marks them dispatched, in one transaction: the rows are locked
// (DeliveryLockUndispatched: SKIP LOCKED on PostgreSQL, the one writer on
// SQLite), so dispatchers of several replicas running at once take
// disjoint rows and each delivery's job is enqueued once. It returns how
// many it enqueued (below max: none are left, or other dispatchers hold
// them).
func (s *DriverStore) DispatchDeliveries(ctx context.Context, max int, job func(id int64) river.InsertManyParams) (int, error) {
	n := 0
	err := s.inTx(ctx, func(_ Tx, x Executor) error {
		ids, err := x.DeliveryLockUndispatched(ctx, max)
		if err != nil {
			return fmt.Errorf("reading undispatched deliveries: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		jobs := make([]river.InsertManyParams, 0, len(ids))
		for _, id := range ids {
			jobs = append(jobs, job(id))
		}
		if err := enqueue(ctx, x, jobs); err != nil {
			return err
		}
		if err := x.DeliveryMarkDispatched(ctx, ids, s.Now()); err != nil {
			return fmt.Errorf("marking %d deliveries dispatched: %w", len(ids), err)
		}
		n = len(ids)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("dispatching deliveries: %w", err)
	}
	return n, nil
}

// GetDelivery reads one delivery; ErrNotFound (wrapped) when there is none.
func (s *DriverStore) GetDelivery(ctx context.Context, db DBTX, id int64) (Delivery, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return Delivery{}, err
	}
	d, err := x.DeliveryGet(ctx, id)
	if err != nil {
		return Delivery{}, fmt.Errorf("reading delivery %d: %w", id, err)
	}
	return d, nil
}

// MarkDeliveryProcessed records the outcome of processing a delivery, at
// the store clock.
func (s *DriverStore) MarkDeliveryProcessed(ctx context.Context, db DBTX, id int64, outcome string) error {
	x, err := s.d.Executor(db)
	if err != nil {
		return err
	}
	if err := x.DeliveryMarkProcessed(ctx, id, outcome, s.Now()); err != nil {
		return fmt.Errorf("marking delivery %d processed: %w", id, err)
	}
	return nil
}

// CountDeliveries returns how many deliveries are stored.
func (s *DriverStore) CountDeliveries(ctx context.Context, db DBTX) (int, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return 0, err
	}
	n, err := x.DeliveryCount(ctx)
	if err != nil {
		return 0, fmt.Errorf("counting deliveries: %w", err)
	}
	return int(n), nil
}

// LastDeliveryID returns the id of the newest stored delivery, 0 when there
// is none. With DeliveriesAfter it tells which deliveries arrived in a
// window without comparing clocks.
func (s *DriverStore) LastDeliveryID(ctx context.Context, db DBTX) (int64, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return 0, err
	}
	id, err := x.DeliveryLastID(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the newest delivery id: %w", err)
	}
	return id, nil
}

// DeliveriesAfter returns the deliveries stored with an id above after,
// oldest first, without their bodies, at most 100.
func (s *DriverStore) DeliveriesAfter(ctx context.Context, db DBTX, after int64) ([]Delivery, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	ds, err := x.DeliveryListAfter(ctx, after)
	if err != nil {
		return nil, fmt.Errorf("reading deliveries after %d: %w", after, err)
	}
	return ds, nil
}

// InsertCallbackRequest records a callback's request id of kind (approval,
// deploy, or another one-off claim such as rate_limit) in db. Request ids are
// unique per kind only (migration 0009): the systems that call back number
// their requests independently. It returns ErrDuplicate when (kind,
// requestID) was recorded before (the whole transaction should then be
// abandoned).
func (s *DriverStore) InsertCallbackRequest(ctx context.Context, db DBTX, requestID, kind, operationID, result string) error {
	x, err := s.d.Executor(db)
	if err != nil {
		return err
	}
	inserted, err := x.CallbackRequestInsertIfNew(ctx, requestID, kind, operationID, result, s.Now())
	if err != nil {
		return fmt.Errorf("recording %s callback request %s: %w", kind, requestID, err)
	}
	if !inserted {
		return ErrDuplicate
	}
	return nil
}

// CallbackResult returns the recorded result of the callback request
// (kind, requestID); ErrNotFound (unwrapped) when unseen.
func (s *DriverStore) CallbackResult(ctx context.Context, db DBTX, kind, requestID string) (string, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return "", err
	}
	r, err := x.CallbackRequestResult(ctx, kind, requestID)
	if errors.Is(err, ErrNotFound) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading %s callback request %s: %w", kind, requestID, err)
	}
	return r, nil
}

// ClaimNote records that the commands of note noteID are being run; it
// returns false when the note was claimed before (a redelivery, an edit, a
// Note Hook of old GitLab without action), so commands run once per note id.
func (s *DriverStore) ClaimNote(ctx context.Context, db DBTX, platform string, projectID, noteID, iid int64, author string) (bool, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return false, err
	}
	n := NoteCommand{Platform: PlatformOr(platform), ProjectID: projectID, NoteID: noteID, MRIID: iid, Author: author}
	claimed, err := x.NoteCommandClaim(ctx, n, s.Now())
	if err != nil {
		return false, fmt.Errorf("claiming note %d: %w", noteID, err)
	}
	return claimed, nil
}

// SetNoteOutcome records what running a note's commands did.
func (s *DriverStore) SetNoteOutcome(ctx context.Context, db DBTX, platform string, projectID, noteID int64, outcome string) error {
	x, err := s.d.Executor(db)
	if err != nil {
		return err
	}
	n := NoteCommand{Platform: PlatformOr(platform), ProjectID: projectID, NoteID: noteID, Outcome: outcome}
	if err := x.NoteCommandSetOutcome(ctx, n); err != nil {
		return fmt.Errorf("recording outcome of note %d: %w", noteID, err)
	}
	return nil
}

// NoteActivity counts author's claimed notes since `since` and how many of
// them were answered as rate limited (for the per-user command rate limit).
func (s *DriverStore) NoteActivity(ctx context.Context, db DBTX, author string, since time.Time) (notes, limited int, err error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return 0, 0, err
	}
	n, l, err := x.NoteCommandActivity(ctx, author, since)
	if err != nil {
		return 0, 0, fmt.Errorf("counting notes of %s: %w", author, err)
	}
	return int(n), int(l), nil
}

// PruneIntake deletes at most limit rows of table (TableWebhookDeliveries
// or TableCallbackRequests) received before before, oldest first, in one
// statement, and returns how many it deleted. A delivery not yet processed
// is kept whatever its age. Callers loop while the count equals limit.
func (s *DriverStore) PruneIntake(ctx context.Context, table string, before time.Time, limit int) (int64, error) {
	x, err := s.d.Executor(s.d.DB())
	if err != nil {
		return 0, err
	}
	var n int64
	switch table {
	case TableWebhookDeliveries:
		n, err = x.DeliveryPrune(ctx, before.UTC(), limit)
	case TableCallbackRequests:
		n, err = x.CallbackRequestPrune(ctx, before.UTC(), limit)
	default:
		return 0, fmt.Errorf("pruning %q: not an intake table", table)
	}
	if err != nil {
		return 0, fmt.Errorf("pruning %s received before %s: %w", table, before.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}

// AddGitLabApproval records username's approval of operationID once; it
// reports whether it is new, and the number of approvals that count now
// (CountGitLabApprovals).
func (s *DriverStore) AddGitLabApproval(ctx context.Context, db DBTX, operationID, username, source string) (added bool, count int, err error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return false, 0, err
	}
	added, err = x.GitLabApprovalAdd(ctx, operationID, username, source, s.Now())
	if err != nil {
		return false, 0, fmt.Errorf("recording approval of %s by %s: %w", operationID, username, err)
	}
	if count, err = s.CountGitLabApprovals(ctx, db, operationID); err != nil {
		return false, 0, err
	}
	return added, count, nil
}

// RemoveGitLabApproval forgets username's approval of operationID; it
// reports whether there was one.
func (s *DriverStore) RemoveGitLabApproval(ctx context.Context, db DBTX, operationID, username string) (bool, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return false, err
	}
	removed, err := x.GitLabApprovalRemove(ctx, operationID, username)
	if err != nil {
		return false, fmt.Errorf("removing approval of %s by %s: %w", operationID, username, err)
	}
	return removed, nil
}

// CountGitLabApprovals returns how many approvers approved operationID,
// never counting the change's requester (nobody approves their own change,
// whatever was recorded).
func (s *DriverStore) CountGitLabApprovals(ctx context.Context, db DBTX, operationID string) (int, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return 0, err
	}
	n, err := x.GitLabApprovalCount(ctx, operationID)
	if err != nil {
		return 0, fmt.Errorf("counting approvals of %s: %w", operationID, err)
	}
	return int(n), nil
}

// ClearGitLabApprovals forgets every approval recorded for operationID (a
// change resumed after its merge request was closed counts only approvals
// given afresh, issue 10 point 1); it returns how many it forgot.
func (s *DriverStore) ClearGitLabApprovals(ctx context.Context, db DBTX, operationID string) (int, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return 0, err
	}
	n, err := x.GitLabApprovalClear(ctx, operationID)
	if err != nil {
		return 0, fmt.Errorf("clearing approvals of %s: %w", operationID, err)
	}
	return int(n), nil
}
