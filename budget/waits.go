package budget

import (
	"context"
	"sync"
	"time"
)

// WaitStore is where every replica records and reads the 429 wait of each
// account (store.AccountWaits).
type WaitStore interface {
	AccountBlockedUntil(ctx context.Context, account string) (time.Time, error)
	BlockAccountUntil(ctx context.Context, account string, until time.Time) error
}

// WaitCacheTTL is how long a replica trusts the account wait it last read
// (on the cache clock: Config.CacheClockFunc, else time.Now): a 429 another replica met is seen within this time (or at
// this replica's next budget take, which refuses while the account waits).
const WaitCacheTTL = time.Second

// Waits is an account's 429 wait (platform/gitlab and platform/github
// AccountWaits) over a WaitStore, read at most once per WaitCacheTTL per
// account instead of before every call. A wait recorded here goes to the
// store at once (every replica sees it at its next read) and holds this
// replica's calls at once. Safe for concurrent use.
type Waits struct {
	st      WaitStore
	now     func() time.Time
	cache   func() time.Time     // the clock cached reads expire on (time.Now unless Budget's CacheClockFunc)
	onBlock func(account string) // Budget drops the account's leases

	mu sync.Mutex
	m  map[string]cachedWait
}

type cachedWait struct {
	until time.Time // the wait, zero for none
	read  time.Time // the read's time on the cache clock; zero: never read, only recorded here
}

// NewWaits returns the cached waits of st; now is the clock the waits are
// compared with (nil: time.Now).
func NewWaits(st WaitStore, now func() time.Time) *Waits {
	if now == nil {
		now = time.Now
	}
	return &Waits{st: st, now: now, cache: time.Now, m: map[string]cachedWait{}}
}

// AccountBlockedUntil returns until when account must wait (the zero time
// or a past moment when it need not): the value read less than
// WaitCacheTTL ago, else one read of the store. Errors are the store's.
func (w *Waits) AccountBlockedUntil(ctx context.Context, account string) (time.Time, error) {
	w.mu.Lock()
	c, ok := w.m[account]
	w.mu.Unlock()
	read := w.cache()
	if ok && !c.read.IsZero() && read.Sub(c.read) < WaitCacheTTL {
		return c.until, nil
	}
	until, err := w.st.AccountBlockedUntil(ctx, account)
	if err != nil {
		return time.Time{}, err
	}
	w.mu.Lock()
	if c := w.m[account]; c.until.After(until) {
		until = c.until // a later wait recorded here meanwhile
	}
	w.m[account] = cachedWait{until: until, read: read}
	w.mu.Unlock()
	return until, nil
}

// BlockAccountUntil records that account must send nothing before until:
// in the store at once (one statement) and in this replica's memory, which
// also drops the account's unspent budget leases. A later wait already
// known is kept.
func (w *Waits) BlockAccountUntil(ctx context.Context, account string, until time.Time) error {
	w.remember(account, until)
	return w.st.BlockAccountUntil(ctx, account, until)
}

// remember keeps until as account's wait in memory when later than the one
// known, and drops the account's leases.
func (w *Waits) remember(account string, until time.Time) {
	w.mu.Lock()
	c := w.m[account]
	if until.After(c.until) {
		c.until = until
	}
	w.m[account] = c
	w.mu.Unlock()
	if w.onBlock != nil {
		w.onBlock(account)
	}
}

// known is account's wait as this replica knows it, without reading the
// store.
func (w *Waits) known(account string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[account].until
}
