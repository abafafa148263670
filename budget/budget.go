// Package budget owns the call budget of each GitLab account (issue 12
// point 4): a token bucket per account stored in the database, so that all
// replicas together stay under the robot's GitLab rate limit; the limits
// that shape it (settings gitlab.budget_*); the priority rule (background
// polls yield while the budget runs low, work a person waits on may use the
// reserve); and the metrics an operator watches. The GitLab adapter takes
// from it before every request (platform/gitlab Config.Budget). It must not
// call GitLab or know the flow's steps.
package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"changebot/platform"
	"changebot/settings"
	"changebot/store"
)

// Store is what the budget needs from the store: the bucket row of each
// account and its 429 wait (store.AccountWaits).
type Store interface {
	WaitStore
	TakeAccountBudget(ctx context.Context, p store.BudgetTakeParams) (store.BudgetTake, error)
	ClampAccountBudget(ctx context.Context, p store.BudgetClampParams) error
}

// Limits shape one account's budget (settings gitlab.budget_per_minute,
// gitlab.budget_burst, gitlab.budget_reserve).
type Limits struct {
	// PerMinute is how many calls per minute flow back into the bucket;
	// 0 turns the budget off (every call is granted; GitLab's 429 waits
	// still hold calls back).
	PerMinute int
	// Burst is the most calls the bucket holds. Over any minute the
	// account sends at most Burst + PerMinute calls: keep that under
	// GitLab's limit (GitLab.com: 2,000 per minute per user).
	Burst int
	// Reserve is how many calls background calls leave in the bucket for
	// calls a person waits on.
	Reserve int
}

// Config wires a Budget.
type Config struct {
	Store Store
	// LimitsFunc returns the limits at every take (runtime settings); nil
	// means DefaultLimits.
	LimitsFunc func() Limits
	// NowFunc is the clock the bucket refills by and waits are measured
	// on; nil means time.Now. The bucket and the waits are shared by every
	// replica, so it must be one clock for all of them: serve passes the
	// database's (Clock.Now). On each replica's own clock a replica 5
	// minutes ahead refilled the bucket up to its future and starved the
	// others (issue 21 point 6).
	NowFunc func() time.Time
	// CacheClockFunc is the clock this replica's leases (LeaseTTL) and
	// cached account waits (WaitCacheTTL) expire on; nil means time.Now.
	// It is not NowFunc: a test that stops NowFunc (a flow harness's
	// clock) must still see leases and cached waits expire, or a replica
	// would spend one lease and trust one read forever.
	CacheClockFunc func() time.Time
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Budget is the call budget of every account of one GitLab instance. It is
// safe for concurrent use. The bucket is the database row, shared by every
// replica; a replica takes calls from it in small batches (a lease, see
// TakeCall) and spends them locally, and keeps each account's 429 wait in
// memory for WaitCacheTTL (the embedded *Waits: pass the Budget as the
// adapter's AccountWaits so that a 429 it meets drops its leases at once).
type Budget struct {
	*Waits
	st     Store
	limits func() Limits
	now    func() time.Time
	cache  func() time.Time // CacheClockFunc
	m      metrics

	mu     sync.Mutex
	leases map[leaseKey]*lease
	// left is, per account, the calls its bucket held after this
	// replica's last take (float64).
	left sync.Map
}

// leaseKey names one lease: an account's calls taken at one priority. Each
// priority spends only its own lease: a person's lease was taken without
// keeping the reserve, so background calls never dip into it.
type leaseKey struct {
	account  string
	priority string
}

// lease is calls taken from the bucket and not yet spent. Calls left when
// it expires (LeaseTTL), when the limits change, or when the account meets
// a 429 or a lower RateLimit-Remaining are dropped: they count as spent
// and are never given back, so replicas together never send more than the
// bucket gave out.
type lease struct {
	calls   float64   // calls left to spend
	bucket  float64   // what the bucket held after the take that made it
	expires time.Time // on the cache clock (Config.CacheClockFunc), not NowFunc
	limits  Limits
}

// MaxBatch is the most calls one take leases; LeaseShare is the share of
// the calls above the priority's keep it takes at most (1/LeaseShare of
// what the bucket held at the last take), so that a low bucket leases one
// call at a time and replicas stay fair; LeaseTTL is how long leased calls
// stay spendable.
const (
	MaxBatch   = 16
	LeaseShare = 8
	LeaseTTL   = time.Second
)

type metrics struct {
	remaining *prometheus.GaugeVec
	held      *prometheus.CounterVec
	taken     *prometheus.CounterVec
}

// Metric label values of the priority label.
const (
	labelPerson     = "person"
	labelBackground = "background"
)

func priorityLabel(p platform.Priority) string {
	if p == platform.PriorityBackground {
		return labelBackground
	}
	return labelPerson
}

// New returns the budget of cfg.
func New(cfg Config) (*Budget, error) {
	if cfg.Store == nil {
		return nil, errors.New("configuring the gitlab call budget: store is required")
	}
	b := &Budget{st: cfg.Store, limits: cfg.LimitsFunc, now: cfg.NowFunc, leases: map[leaseKey]*lease{}}
	if b.limits == nil {
		b.limits = func() Limits { return DefaultLimits }
	}
	if b.now == nil {
		b.now = time.Now
	}
	b.cache = cfg.CacheClockFunc
	if b.cache == nil {
		b.cache = time.Now
	}
	b.Waits = NewWaits(cfg.Store, b.now)
	b.Waits.cache = b.cache
	b.onBlock = b.dropLeases
	b.m = metrics{
		remaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "changebot_gitlab_budget_remaining",
			Help: "Calls left in a GitLab account's call budget after this replica's last take (shared by all replicas), by account (instance and token fingerprint).",
		}, []string{"account"}),
		held: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changebot_gitlab_budget_held_total",
			Help: "GitLab calls the call budget held back unsent (the job waits and tries again), by priority (person, background).",
		}, []string{"priority"}),
		taken: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "changebot_gitlab_budget_taken_total",
			Help: "GitLab calls granted by the call budget, by priority (person, background).",
		}, []string{"priority"}),
	}
	for _, l := range []string{labelPerson, labelBackground} {
		b.m.held.WithLabelValues(l)
		b.m.taken.WithLabelValues(l)
	}
	if cfg.Registerer != nil {
		if err := registerAll(cfg.Registerer, b.m.remaining, b.m.held, b.m.taken); err != nil {
			return nil, fmt.Errorf("registering the gitlab call budget's metrics: %w", err)
		}
	}
	return b, nil
}

func registerAll(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// rate is the store's shape of l.
func (l Limits) rate() store.BudgetRate {
	return store.BudgetRate{Capacity: float64(l.Burst), PerSecond: float64(l.PerMinute) / 60}
}

// keep is how many calls a take at priority p must leave in the bucket.
func (l Limits) keep(p platform.Priority) float64 {
	if p == platform.PriorityBackground {
		return float64(l.Reserve)
	}
	return 0
}

// TakeCall takes one call of account at priority p (platform/gitlab
// CallBudget). It returns wait 0 and the calls left when granted (the
// bucket after this replica's last take plus its unspent lease; -1 when the
// budget is off); otherwise how long until the account's 429 wait ends or,
// by the refill rate, until the bucket holds a call for p again (at least
// MinWait). Errors are the store's.
//
// Cost: a call spent from this replica's lease costs no statement; else
// one UPDATE takes a batch of n calls, n = min(MaxBatch, (bucket - keep) /
// LeaseShare) by what the bucket held at the last take (1 when unknown or
// low; a refused batch is retried once as a single call). With the budget
// off the account's 429 wait is read at most once per WaitCacheTTL.
func (b *Budget) TakeCall(ctx context.Context, account string, p platform.Priority) (time.Duration, float64, error) {
	l := b.limits()
	now := b.now()
	label := priorityLabel(p)
	if l.PerMinute <= 0 {
		// No budget: the account's 429 wait alone (cached).
		until, err := b.AccountBlockedUntil(ctx, account)
		if err != nil {
			return 0, 0, err
		}
		if until.After(now) {
			b.m.held.WithLabelValues(label).Inc()
			return max(until.Sub(now), MinWait), 0, nil
		}
		b.m.taken.WithLabelValues(label).Inc()
		return 0, -1, nil
	}
	l.Burst = max(l.Burst, 1)
	if until := b.known(account); until.After(now) {
		// A 429 this replica met (or read): its leases are gone.
		b.m.held.WithLabelValues(label).Inc()
		return max(until.Sub(now), MinWait), 0, nil
	}
	key := leaseKey{account: account, priority: label}
	n := 1.0
	b.mu.Lock()
	if ls := b.leases[key]; ls != nil {
		if ls.limits == l && b.cache().Before(ls.expires) && ls.calls >= 1 {
			ls.calls--
			left := ls.bucket + ls.calls
			b.mu.Unlock()
			b.m.taken.WithLabelValues(label).Inc()
			return 0, left, nil
		}
		if ls.limits == l {
			n = batchOf(l, p, ls.bucket)
		}
		delete(b.leases, key)
	}
	b.mu.Unlock()
	got, err := b.st.TakeAccountBudget(ctx, store.BudgetTakeParams{Account: account, Now: now, Rate: l.rate(),
		Keep: l.keep(p), N: n})
	if err == nil && !got.Granted && n > 1 && !got.BlockedUntil.After(now) {
		n = 1
		got, err = b.st.TakeAccountBudget(ctx, store.BudgetTakeParams{Account: account, Now: now, Rate: l.rate(),
			Keep: l.keep(p), N: 1})
	}
	if err != nil {
		return 0, 0, err
	}
	b.m.remaining.WithLabelValues(account).Set(got.Tokens)
	b.left.Store(account, got.Tokens)
	if got.BlockedUntil.After(now) {
		b.remember(account, got.BlockedUntil)
	}
	if got.Granted {
		// n == 1 leaves an empty lease: the bucket it saw sizes the next take.
		b.mu.Lock()
		b.leases[key] = &lease{calls: n - 1, bucket: got.Tokens, expires: b.cache().Add(LeaseTTL), limits: l}
		b.mu.Unlock()
		b.m.taken.WithLabelValues(label).Inc()
		return 0, got.Tokens + n - 1, nil
	}
	b.m.held.WithLabelValues(label).Inc()
	return waitFor(l, p, got, now), got.Tokens, nil
}

// batchOf is how many calls a take at priority p leases when the bucket
// held bucket calls at the last take: 1/LeaseShare of those above p's keep,
// between 1 and MaxBatch.
func batchOf(l Limits, p platform.Priority, bucket float64) float64 {
	n := math.Floor((bucket - l.keep(p)) / LeaseShare)
	return max(1, min(n, MaxBatch))
}

// dropLeases drops account's unspent leases (they count as spent).
func (b *Budget) dropLeases(account string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.leases {
		if k.account == account {
			delete(b.leases, k)
		}
	}
}

// MinWait is the shortest wait TakeCall answers, so that a held job never
// spins.
const MinWait = 100 * time.Millisecond

// waitFor is how long a refused take at priority p waits: until the
// account's 429 wait ends, else until the refill brings keep + 1 calls.
func waitFor(l Limits, p platform.Priority, got store.BudgetTake, now time.Time) time.Duration {
	if got.BlockedUntil.After(now) {
		return max(got.BlockedUntil.Sub(now), MinWait)
	}
	need := l.keep(p) + 1 - got.Tokens
	perSecond := l.rate().PerSecond
	if need <= 0 || perSecond <= 0 {
		return MinWait
	}
	return max(time.Duration(need/perSecond*float64(time.Second)), MinWait)
}

// Left is, per account (instance and token fingerprint), the calls its
// bucket held after this replica's last take: what the operators'
// overview shows as the budget left. Accounts this replica has not taken
// from are absent; the bucket is shared, so another replica's takes since
// are not counted.
func (b *Budget) Left() map[string]float64 {
	out := map[string]float64{}
	b.left.Range(func(k, v any) bool {
		out[k.(string)] = v.(float64)
		return true
	})
	return out
}

// RemainingCalls lowers account's budget to remaining calls (GitLab's
// RateLimit-Remaining answered fewer than the budget held): one statement,
// at once; this replica's unspent leases of account are dropped.
func (b *Budget) RemainingCalls(ctx context.Context, account string, remaining int) error {
	l := b.limits()
	if l.PerMinute <= 0 {
		return nil
	}
	l.Burst = max(l.Burst, 1)
	b.dropLeases(account)
	return b.st.ClampAccountBudget(ctx, store.BudgetClampParams{Account: account, Now: b.now(), Rate: l.rate(),
		Remaining: float64(remaining)})
}

// DefaultLimits are the settings registry's defaults (package settings is
// their one source).
var DefaultLimits = Limits{
	PerMinute: settings.DefaultValue(settings.GitLabBudgetPerMinute).Int(),
	Burst:     settings.DefaultValue(settings.GitLabBudgetBurst).Int(),
	Reserve:   settings.DefaultValue(settings.GitLabBudgetReserve).Int(),
}

// LimitsOf reads the limits from the settings (global scope).
func LimitsOf(get func(key string) settings.Value) Limits {
	return Limits{
		PerMinute: get(settings.GitLabBudgetPerMinute).Int(),
		Burst:     get(settings.GitLabBudgetBurst).Int(),
		Reserve:   get(settings.GitLabBudgetReserve).Int(),
	}
}
