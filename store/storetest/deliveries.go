package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"changebot/store"
)

// jobRecorder is an InsertDeliveries job function that records the ids it
// was asked to enqueue (the contract cannot read River's tables).
type jobRecorder struct {
	mu  sync.Mutex
	ids []int64
}

func (r *jobRecorder) job(id int64) river.InsertManyParams {
	r.mu.Lock()
	r.ids = append(r.ids, id)
	r.mu.Unlock()
	return deliveryJob(id)
}

func (r *jobRecorder) sorted() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.ids))
}

func delivery(key string) store.Delivery {
	return store.Delivery{DedupeKey: key, Event: "Pipeline Hook", ProjectID: 9, Body: []byte(`{"k":"` + key + `"}`)}
}

// InsertDeliveriesDedupe (issue 12): a batch stores the first delivery of
// each new key, answers every later copy in the batch and every key stored
// by an earlier batch as a duplicate, and enqueues one job per stored
// delivery, with its id.
func testInsertDeliveriesDedupe(t *testing.T, open Open) {
	s := open(t)(Opts{})
	ctx := context.Background()
	var jobs jobRecorder
	type want struct {
		key      string
		inserted bool
	}
	batches := [][]want{
		{{"a", true}, {"b", true}, {"a", false}, {"c", true}, {"a", false}},
		{{"c", false}, {"d", true}, {"d", false}, {"b", false}},
		{{"e", true}},
		{{"e", false}},
	}
	ids := map[string]int64{}
	for n, batch := range batches {
		ds := make([]store.Delivery, len(batch))
		for i, w := range batch {
			ds[i] = delivery(w.key)
		}
		out, err := s.InsertDeliveries(ctx, ds, jobs.job)
		if err != nil {
			t.Fatalf("batch %d: InsertDeliveries: %v", n, err)
		}
		if len(out) != len(ds) {
			t.Fatalf("batch %d: %d answers for %d deliveries", n, len(out), len(ds))
		}
		for i, w := range batch {
			if out[i].Inserted != w.inserted {
				t.Errorf("batch %d, delivery %d (%s): inserted=%v, want %v", n, i, w.key, out[i].Inserted, w.inserted)
			}
			if !w.inserted {
				if out[i].ID != 0 {
					t.Errorf("batch %d, delivery %d (%s): duplicate answered with id %d, want 0", n, i, w.key, out[i].ID)
				}
				continue
			}
			if _, seen := ids[w.key]; seen || out[i].ID == 0 {
				t.Errorf("batch %d, delivery %d (%s): id %d (ids so far %v)", n, i, w.key, out[i].ID, ids)
			}
			ids[w.key] = out[i].ID
		}
	}
	if got, err := s.CountDeliveries(ctx, s.DB()); err != nil || got != 5 {
		t.Fatalf("CountDeliveries = %d, %v; want 5 (a to e)", got, err)
	}
	var wantJobs []int64
	for key, id := range ids {
		d, err := s.GetDelivery(ctx, s.DB(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.DedupeKey != key || string(d.Body) != `{"k":"`+key+`"}` || d.Event != "Pipeline Hook" || d.ProjectID != 9 {
			t.Errorf("delivery %d read back as %+v, want key %s", id, d, key)
		}
		wantJobs = append(wantJobs, id)
	}
	slices.Sort(wantJobs)
	if got := jobs.sorted(); !slices.Equal(got, wantJobs) {
		t.Errorf("jobs enqueued for deliveries %v, want one per stored delivery %v", got, wantJobs)
	}
	if out, err := s.InsertDeliveries(ctx, nil, jobs.job); err != nil || len(out) != 0 {
		t.Errorf("InsertDeliveries(nil) = %v, %v; want nothing", out, err)
	}
}

// InsertDeliveriesConcurrent (issue 12): batches sharing keys, written at
// once from two replicas of the store, store each key once and enqueue one
// job for it; exactly one batch answers it inserted.
func testInsertDeliveriesConcurrent(t *testing.T, open Open) {
	opener := open(t)
	replicas := []store.Store{opener(Opts{}), opener(Opts{})}
	ctx := context.Background()
	const writers, keys, rounds = 8, 12, 5
	var jobs jobRecorder
	inserted := make([][]int64, keys) // ids answered inserted, per key
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		wg.Go(func() {
			s := replicas[w%len(replicas)]
			for r := range rounds {
				// Each writer's batch holds keys in its own order, some twice.
				var ds []store.Delivery
				for k := range keys {
					key := (k*(w+1) + r) % keys
					ds = append(ds, delivery(fmt.Sprintf("key-%d-%d", r, key)))
					if k%4 == w%4 {
						ds = append(ds, delivery(fmt.Sprintf("key-%d-%d", r, key)))
					}
				}
				out, err := s.InsertDeliveries(ctx, ds, jobs.job)
				if err != nil {
					errs <- fmt.Errorf("writer %d round %d: %w", w, r, err)
					return
				}
				mu.Lock()
				for i, o := range out {
					if o.Inserted {
						var key int
						if _, err := fmt.Sscanf(ds[i].DedupeKey, "key-%d-%d", new(int), &key); err != nil {
							errs <- err
						}
						inserted[key] = append(inserted[key], o.ID)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var all []int64
	for key, ids := range inserted {
		if len(ids) != rounds {
			t.Errorf("key %d answered inserted %d times over %d rounds, want once per round", key, len(ids), rounds)
		}
		all = append(all, ids...)
	}
	if got, err := replicas[0].CountDeliveries(ctx, replicas[0].DB()); err != nil || got != keys*rounds {
		t.Errorf("CountDeliveries = %d, %v; want %d", got, err, keys*rounds)
	}
	slices.Sort(all)
	if got := jobs.sorted(); !slices.Equal(got, all) {
		t.Errorf("%d jobs enqueued, want one per stored delivery (%d)", len(got), len(all))
	}
}

// DispatchDeliveriesConcurrent (issue 12): deliveries stored without their
// jobs (StoreDeliveries, some keys twice) while two dispatchers on two
// replicas of the store run at once are each enqueued exactly once and
// marked dispatched; duplicates are answered as InsertDeliveries answers
// them.
func testDispatchDeliveriesConcurrent(t *testing.T, open Open) {
	opener := open(t)
	replicas := []store.Store{opener(Opts{}), opener(Opts{})}
	ctx := context.Background()
	const writers, rounds, perBatch = 4, 10, 6
	var jobs jobRecorder
	var mu sync.Mutex
	var stored []int64
	var wg, dispatchers sync.WaitGroup
	errs := make(chan error, writers*rounds+64)
	done := make(chan struct{})
	dispatched := make([]int, len(replicas))
	for d, s := range replicas {
		dispatchers.Go(func() {
			for {
				n, err := s.DispatchDeliveries(ctx, 7, jobs.job)
				if err != nil {
					errs <- fmt.Errorf("dispatcher %d: %w", d, err)
					return
				}
				dispatched[d] += n
				select {
				case <-done:
					if n == 0 {
						return
					}
				default:
				}
			}
		})
	}
	for w := range writers {
		wg.Go(func() {
			s := replicas[w%len(replicas)]
			for r := range rounds {
				var ds []store.Delivery
				for k := range perBatch {
					// Writers w and w+1 share half their keys.
					ds = append(ds, delivery(fmt.Sprintf("d-%d-%d-%d", r, (w+k%2)/2*2, k)))
				}
				ds = append(ds, ds[0])
				out, err := s.StoreDeliveries(ctx, ds)
				if err != nil {
					errs <- fmt.Errorf("writer %d round %d: %w", w, r, err)
					return
				}
				if out[len(ds)-1].Inserted {
					errs <- fmt.Errorf("writer %d round %d: a key's second copy in one batch answered inserted", w, r)
				}
				mu.Lock()
				for _, o := range out {
					if o.Inserted {
						stored = append(stored, o.ID)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(done)
	dispatchers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	count, err := replicas[0].CountDeliveries(ctx, replicas[0].DB())
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != count {
		t.Errorf("%d deliveries answered inserted, %d stored; want one answer per stored delivery", len(stored), count)
	}
	slices.Sort(stored)
	if got := jobs.sorted(); !slices.Equal(got, stored) {
		t.Errorf("%d jobs enqueued (%d and %d by the two dispatchers), want one per stored delivery (%d)",
			len(got), dispatched[0], dispatched[1], len(stored))
	}
	for _, id := range stored {
		d, err := replicas[1].GetDelivery(ctx, replicas[1].DB(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.DispatchedAt == nil {
			t.Errorf("delivery %d enqueued but not marked dispatched", id)
		}
	}
}

// DispatchAfterCrash (issue 12): deliveries a replica stored but never
// dispatched (it died between the two) wait, undispatched, for any other
// replica's dispatcher, which enqueues them once; deliveries stored with
// their jobs (InsertDeliveries) are never dispatched again.
func testDispatchAfterCrash(t *testing.T, open Open) {
	opener := open(t)
	crashed, other := opener(Opts{}), opener(Opts{})
	ctx := context.Background()
	var enqueued jobRecorder
	if _, err := crashed.InsertDeliveries(ctx, []store.Delivery{delivery("with-job")}, enqueued.job); err != nil {
		t.Fatal(err)
	}
	out, err := crashed.StoreDeliveries(ctx, []store.Delivery{delivery("a"), delivery("b"), delivery("with-job")})
	if err != nil {
		t.Fatal(err)
	}
	if !out[0].Inserted || !out[1].Inserted || out[2].Inserted {
		t.Fatalf("StoreDeliveries answered %+v; want a and b inserted, with-job a duplicate", out)
	}
	for _, o := range out[:2] {
		d, err := other.GetDelivery(ctx, other.DB(), o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.DispatchedAt != nil {
			t.Errorf("delivery %d stored without its job reads dispatched at %v", o.ID, d.DispatchedAt)
		}
	}
	// Retention deletes processed deliveries, never undispatched ones.
	withJob, err := crashed.DeliveriesAfter(ctx, crashed.DB(), 0)
	if err != nil || len(withJob) != 3 {
		t.Fatalf("DeliveriesAfter = %d deliveries, %v; want 3", len(withJob), err)
	}
	if err := crashed.MarkDeliveryProcessed(ctx, crashed.DB(), withJob[0].ID, "done"); err != nil {
		t.Fatal(err)
	}
	if n, err := other.PruneIntake(ctx, store.TableWebhookDeliveries, other.Now().Add(time.Hour), 100); err != nil || n != 1 {
		t.Errorf("PruneIntake = %d, %v; want the processed delivery alone", n, err)
	}
	var jobs jobRecorder
	n, err := other.DispatchDeliveries(ctx, 100, jobs.job)
	if err != nil || n != 2 {
		t.Fatalf("DispatchDeliveries = %d, %v; want the 2 undispatched deliveries", n, err)
	}
	if got, want := jobs.sorted(), []int64{out[0].ID, out[1].ID}; !slices.Equal(got, want) {
		t.Errorf("dispatched jobs for %v, want %v", got, want)
	}
	if n, err := other.DispatchDeliveries(ctx, 100, jobs.job); err != nil || n != 0 {
		t.Errorf("a second pass = %d, %v; want nothing left", n, err)
	}
}
