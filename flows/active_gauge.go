package flows

import (
	"context"
	"time"

	"changebot/store"
)

// ActiveGaugeStore is what the active changes gauge reads (implemented by
// *postgres.Store).
type ActiveGaugeStore interface {
	IsJobLeader(ctx context.Context, db store.DBTX, clientID string) (bool, error)
	CountByStatusWithAge(ctx context.Context, db store.DBTX, statuses []string) ([]store.StatusAge, error)
}

// ActiveGaugeConfig configures an ActiveGauge.
type ActiveGaugeConfig struct {
	Store ActiveGaugeStore
	DB    store.DBTX
	// Metrics holds the gauges changebot_active_changes and
	// changebot_active_changes_oldest_seconds.
	Metrics *Metrics
	// ClientIDFunc returns this replica's River client id (leadership is
	// River's).
	ClientIDFunc func() string
	// NowFunc is the clock; nil means time.Now.
	NowFunc func() time.Time
}

// ActiveGauge sets changebot_active_changes and
// changebot_active_changes_oldest_seconds from the database, on the job
// queue's elected leader only: every other replica exports none, so the
// dashboards and the "stuck" alerts (deploy/) see one set of numbers.
type ActiveGauge struct {
	cfg ActiveGaugeConfig
}

// NewActiveGauge returns the gauge refresher of cfg.
func NewActiveGauge(cfg ActiveGaugeConfig) *ActiveGauge {
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	return &ActiveGauge{cfg: cfg}
}

// Refresh runs once: on the leader, one leadership read and one count query
// (bounded whatever the number of changes: per active status, zero counts
// included); elsewhere, one leadership read and the gauges cleared.
func (g *ActiveGauge) Refresh(ctx context.Context) error {
	m := g.cfg.Metrics
	leader, err := g.cfg.Store.IsJobLeader(ctx, g.cfg.DB, g.cfg.ClientIDFunc())
	if err != nil {
		return err
	}
	if !leader {
		m.active.Reset()
		m.oldest.Reset()
		return nil
	}
	counts, err := g.cfg.Store.CountByStatusWithAge(ctx, g.cfg.DB, store.ActiveStatuses())
	if err != nil {
		return err
	}
	now := g.cfg.NowFunc()
	for _, c := range counts {
		m.active.WithLabelValues(c.Status).Set(float64(c.Count))
		age := 0.0
		if c.Count > 0 {
			age = max(0, now.Sub(c.OldestUpdatedAt).Seconds())
		}
		m.oldest.WithLabelValues(c.Status).Set(age)
	}
	return nil
}

// ActiveGaugeInterval is how often Run refreshes the gauges.
const ActiveGaugeInterval = 15 * time.Second

// Run refreshes the gauges soon after it starts and then every interval
// until ctx ends. A failed refresh is logged by logf and retried at the
// next tick.
func (g *ActiveGauge) Run(ctx context.Context, interval time.Duration, logf func(err error)) {
	t := time.NewTimer(time.Second) // leave River a moment to elect a leader
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := g.Refresh(ctx); err != nil && ctx.Err() == nil {
			logf(err)
		}
		t.Reset(interval)
	}
}
