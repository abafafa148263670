package webhooks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"changebot/internal/groupcommit"
	"changebot/store"
)

// DefaultMaxBatch is the most deliveries one intake transaction stores
// when GitLabConfig.MaxBatch is zero: a batch of 6 kB deliveries stays
// under half a megabyte per statement.
const DefaultMaxBatch = 64

// DefaultMaxInFlight is how many intake transactions may commit at once
// when GitLabConfig.MaxInFlight is zero and the store does not say
// otherwise (writeConcurrency). Two, measured on PostgreSQL (BENCHMARKS.md,
// 8 senders): one at a time left the database idle between commits and
// halved the rate; more made batches of one again.
const DefaultMaxInFlight = 2

// writeConcurrency is implemented by a store whose writers queue on one
// lock (store/sqlite answers 1): a second intake transaction would only
// wait for the lock, so the intake commits that many at a time.
type writeConcurrency interface {
	WriteConcurrency() int
}

// deliveryCommitter stores the deliveries of concurrent requests through
// one group commit (issue 12): while one transaction commits, the next
// deliveries queue, and the next transaction stores up to maxBatch of them
// with their jobs. Both platforms' handlers store through one.
//
// With a dispatcher, a batch is stored without its jobs by one autocommit
// statement (the store's StoreDeliveries: one durable round trip on the
// request path) and the dispatcher is woken to enqueue them.
type deliveryCommitter struct {
	store      DeliveryStore
	outbox     deliveryOutbox // set with dispatcher
	dispatcher *Dispatcher
	m          *Metrics
	commits    *groupcommit.Batcher[store.Delivery, store.DeliveryInsert]
}

// newDeliveryCommitter returns a committer over st; maxBatch zero means
// DefaultMaxBatch, maxInFlight zero the store's WriteConcurrency or else
// DefaultMaxInFlight; timeout bounds each transaction. With a dispatcher
// (nil: jobs enqueued with their deliveries), st must store deliveries
// without their jobs (StoreDeliveries), or it errors.
func newDeliveryCommitter(st DeliveryStore, dispatcher *Dispatcher, m *Metrics, maxBatch, maxInFlight int, timeout time.Duration) (*deliveryCommitter, error) {
	c := &deliveryCommitter{store: st, m: m}
	if dispatcher != nil {
		ob, ok := st.(deliveryOutbox)
		if !ok {
			return nil, fmt.Errorf("configuring the webhook intake: a dispatcher needs a store with StoreDeliveries, not %T", st)
		}
		c.outbox, c.dispatcher = ob, dispatcher
	}
	if wc, ok := st.(writeConcurrency); ok && maxInFlight == 0 {
		maxInFlight = wc.WriteConcurrency()
	}
	b, err := groupcommit.New(groupcommit.Config[store.Delivery, store.DeliveryInsert]{
		Flush:    c.insert,
		MaxBatch: cmp.Or(maxBatch, DefaultMaxBatch), Timeout: timeout, MaxInFlight: cmp.Or(maxInFlight, DefaultMaxInFlight),
	})
	if err != nil {
		return nil, err
	}
	c.commits = b
	return c, nil
}

// insert stores one batch in one transaction: with a dispatcher the
// deliveries alone, then wakes it; else with their jobs.
func (c *deliveryCommitter) insert(ctx context.Context, ds []store.Delivery) ([]store.DeliveryInsert, error) {
	c.m.batch.Observe(float64(len(ds)))
	if c.dispatcher == nil {
		return c.store.InsertDeliveries(ctx, ds, ProcessDeliveryJob)
	}
	out, err := c.outbox.StoreDeliveries(ctx, ds)
	if err != nil {
		return nil, err
	}
	for _, o := range out {
		if o.Inserted {
			c.dispatcher.Wake()
			break
		}
	}
	return out, nil
}

// commit stores d through the group commit. When the shared commit failed
// for a batch of several deliveries, d is stored again on its own: the
// failure may be another delivery's (one the database refuses), and every
// request must get its own delivery's answer. Failing them all with 503
// instead would rely on the sender resending, which GitLab does not do
// (DefaultStoreTimeout). A delivery whose shared commit's answer was lost
// after it committed is answered duplicate then, which is true: it is
// stored once, its job enqueued once.
func (c *deliveryCommitter) commit(ctx context.Context, log *slog.Logger, d store.Delivery) (store.DeliveryInsert, error) {
	res, err := c.commits.Do(ctx, d)
	var fe *groupcommit.FlushError
	if !errors.As(err, &fe) || fe.Size == 1 {
		return res, err
	}
	log.Warn("shared intake commit failed; storing the delivery alone", "batch", fe.Size, attrError, fe.Err)
	out, err := c.insert(ctx, []store.Delivery{d})
	if err != nil {
		return store.DeliveryInsert{}, err
	}
	if len(out) != 1 {
		return store.DeliveryInsert{}, fmt.Errorf("storing one delivery: %d answers", len(out))
	}
	return out[0], nil
}

// Close refuses new deliveries (their requests answer 503) and waits until
// every queued one is committed and answered, or ctx ends.
func (c *deliveryCommitter) Close(ctx context.Context) error { return c.commits.Close(ctx) }
