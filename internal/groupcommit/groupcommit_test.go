package groupcommit

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a flush that doubles each item, records every batch, and
// holds the first flush until release is closed (so that the others queue).
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	release chan struct{}
	fail    func(items []int) error
}

func (r *recorder) flush(_ context.Context, items []int) ([]int, error) {
	r.mu.Lock()
	first := len(r.batches) == 0
	r.batches = append(r.batches, slices.Clone(items))
	r.mu.Unlock()
	if first && r.release != nil {
		<-r.release
	}
	if r.fail != nil {
		if err := r.fail(items); err != nil {
			return nil, err
		}
	}
	out := make([]int, len(items))
	for i, v := range items {
		out[i] = 2 * v
	}
	return out, nil
}

func (r *recorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []int
	for _, b := range r.batches {
		s = append(s, len(b))
	}
	return s
}

func newBatcher(t *testing.T, r *recorder, maxBatch int) *Batcher[int, int] {
	t.Helper()
	b, err := New(Config[int, int]{Flush: r.flush, MaxBatch: maxBatch, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// queued waits until n callers wait in b's queue (not a timed assertion:
// it only orders the test's goroutines).
func queued(b *Batcher[int, int], n int) {
	for {
		b.mu.Lock()
		l := len(b.queue)
		b.mu.Unlock()
		if l >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

type result struct {
	item, got int
	err       error
}

// start runs Do for each item on its own goroutine.
func start(b *Batcher[int, int], items ...int) (wait func() []result) {
	res := make([]result, len(items))
	var wg sync.WaitGroup
	for i, v := range items {
		wg.Go(func() {
			got, err := b.Do(context.Background(), v)
			res[i] = result{v, got, err}
		})
	}
	return func() []result { wg.Wait(); return res }
}

// TestGroupCommitSharesFlushes: while a flush is in flight, arriving items
// queue and the next flushes take them all, MaxBatch at a time; each caller
// gets its own item's result and every item is flushed once.
func TestGroupCommitSharesFlushes(t *testing.T) {
	r := &recorder{release: make(chan struct{})}
	b := newBatcher(t, r, 4)
	first := start(b, 100)
	for len(r.sizes()) == 0 { // the first flush holds item 100
		time.Sleep(time.Millisecond)
	}
	items := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	rest := start(b, items...)
	queued(b, len(items))
	close(r.release)
	res := append(first(), rest()...)
	for _, x := range res {
		if x.err != nil || x.got != 2*x.item {
			t.Errorf("item %d answered %d, %v; want %d", x.item, x.got, x.err, 2*x.item)
		}
	}
	if got, want := r.sizes(), []int{1, 4, 4, 2}; !slices.Equal(got, want) {
		t.Errorf("flush sizes %v, want %v (one in flight, then the queue in batches of at most 4)", got, want)
	}
	var flushed []int
	for _, batch := range r.batches {
		flushed = append(flushed, batch...)
	}
	slices.Sort(flushed)
	if want := append([]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 100); !slices.Equal(flushed, want) {
		t.Errorf("flushed %v, want each item once: %v", flushed, want)
	}
}

// TestGroupCommitFailedFlushAnswersEveryWaiter: a flush that fails answers
// each of its callers with a FlushError naming the batch size; a panicking
// flush too; later batches still run.
func TestGroupCommitFailedFlushAnswersEveryWaiter(t *testing.T) {
	errPoison := errors.New("poison item")
	r := &recorder{release: make(chan struct{})}
	r.fail = func(items []int) error {
		if slices.Contains(items, 13) {
			return errPoison
		}
		if slices.Contains(items, 66) {
			panic("flush bug")
		}
		return nil
	}
	b := newBatcher(t, r, 3)
	first := start(b, 100)
	for len(r.sizes()) == 0 {
		time.Sleep(time.Millisecond)
	}
	// Queued in this order they form the batches [11 12 13] [64 65 66] [7].
	var waits []func() []result
	for _, v := range []int{11, 12, 13, 64, 65, 66, 7} {
		waits = append(waits, start(b, v))
		queued(b, len(waits))
	}
	close(r.release)
	var res []result
	for _, w := range append(waits, first) {
		res = append(res, w()...)
	}
	for _, x := range res {
		var fe *FlushError
		switch x.item {
		case 11, 12, 13:
			if !errors.As(x.err, &fe) || fe.Size != 3 || !errors.Is(x.err, errPoison) {
				t.Errorf("item %d: %v, want a FlushError of size 3 wrapping the poison", x.item, x.err)
			}
		case 64, 65, 66:
			if !errors.As(x.err, &fe) || fe.Size != 3 {
				t.Errorf("item %d: %v, want the panic as a FlushError of size 3", x.item, x.err)
			}
		default:
			if x.err != nil || x.got != 2*x.item {
				t.Errorf("item %d answered %d, %v; want %d", x.item, x.got, x.err, 2*x.item)
			}
		}
	}
	if got, want := r.sizes(), []int{1, 3, 3, 1}; !slices.Equal(got, want) {
		t.Errorf("flush sizes %v, want %v", got, want)
	}
}

// TestGroupCommitCloseDrains: Close waits until every queued item was
// flushed and answered, and refuses items after it.
func TestGroupCommitCloseDrains(t *testing.T) {
	r := &recorder{release: make(chan struct{})}
	b := newBatcher(t, r, 8)
	first := start(b, 100)
	for len(r.sizes()) == 0 {
		time.Sleep(time.Millisecond)
	}
	rest := start(b, 1, 2, 3)
	queued(b, 3)
	closed := make(chan error, 1)
	go func() { closed <- b.Close(context.Background()) }()
	for { // wait until Close has begun
		b.mu.Lock()
		c := b.closed
		b.mu.Unlock()
		if c {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Do(context.Background(), 9); !errors.Is(err, ErrClosed) {
		t.Errorf("Do during Close: %v, want ErrClosed", err)
	}
	close(r.release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := r.sizes(); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("flush sizes %v when Close returned, want [1 3]: every queued item flushed", got)
	}
	for _, x := range append(first(), rest()...) {
		if x.err != nil || x.got != 2*x.item {
			t.Errorf("item %d answered %d, %v; want %d", x.item, x.got, x.err, 2*x.item)
		}
	}
}

// TestGroupCommitDropsCallersThatGaveUp: a caller whose context ended while
// it queued gets its context's error and its item is never flushed.
func TestGroupCommitDropsCallersThatGaveUp(t *testing.T) {
	r := &recorder{release: make(chan struct{})}
	b := newBatcher(t, r, 8)
	first := start(b, 100)
	for len(r.sizes()) == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { _, err := b.Do(ctx, 5); gaveUp <- err }()
	queued(b, 1)
	rest := start(b, 6)
	queued(b, 2)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("the caller that gave up got %v, want context.Canceled", err)
	}
	close(r.release)
	first()
	rest()
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.batches; len(got) != 2 || !slices.Equal(got[1], []int{6}) {
		t.Errorf("batches %v, want [[100] [6]]: item 5 dropped", got)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, err := New(Config[int, int]{})
	if err == nil {
		t.Fatal("New accepted an empty config")
	}
	for _, want := range []string{"flush function", "max batch 0", "timeout 0s"} {
		if !contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestGroupCommitMaxInFlight: with MaxInFlight 2 a second flush starts
// while the first is in flight, and a third item waits for one of them.
func TestGroupCommitMaxInFlight(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	inFlight, most := 0, 0
	entered := make(chan struct{}, 8)
	b, err := New(Config[int, int]{MaxBatch: 8, Timeout: time.Minute, MaxInFlight: 2,
		Flush: func(_ context.Context, items []int) ([]int, error) {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			entered <- struct{}{}
			<-release
			mu.Lock()
			inFlight--
			mu.Unlock()
			return items, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	first := start(b, 1)
	<-entered
	second := start(b, 2)
	<-entered // both flushes hold the store at once
	third := start(b, 3)
	queued(b, 1)
	close(release)
	for _, x := range slices.Concat(first(), second(), third()) {
		if x.err != nil || x.got != x.item {
			t.Errorf("item %d answered %d, %v", x.item, x.got, x.err)
		}
	}
	if most != 2 {
		t.Errorf("at most %d flushes in flight, want 2", most)
	}
}
