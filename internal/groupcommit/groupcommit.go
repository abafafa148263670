// Package groupcommit shares one flush (a database transaction and its
// commit) between concurrent callers: while a flush is in flight, arriving
// items queue; the next flush takes every queued item, at most a bounded
// number, and each caller gets its own item's result. It knows nothing of
// what is flushed (the webhook intake flushes deliveries, issue 12).
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"changebot/internal/guard"
)

// ErrClosed is returned by Do after Close began: the item was not queued.
var ErrClosed = errors.New("group commit closed")

// FlushError is Do's error when the flush holding the item failed as a
// whole. Size is how many items that flush held: with Size > 1 the item may
// be retried on its own, since another item may have failed the flush.
type FlushError struct {
	Size int
	Err  error
}

func (e *FlushError) Error() string {
	return fmt.Sprintf("flush of %d items failed: %v", e.Size, e.Err)
}

func (e *FlushError) Unwrap() error { return e.Err }

// Flush writes items and returns one result per item, in the items' order
// (out[i] answers items[i]). An error fails every item of the call; a
// result slice of another length is treated as an error.
type Flush[T, R any] func(ctx context.Context, items []T) (out []R, err error)

// Config configures New.
type Config[T, R any] struct {
	// Flush writes a batch. Required.
	Flush Flush[T, R]
	// MaxBatch bounds the items of one flush; at least 1.
	MaxBatch int
	// Timeout bounds one flush (its context is not any caller's, so that
	// one caller giving up never fails the others); at least 1 ns.
	Timeout time.Duration
	// MaxInFlight bounds the flushes running at once; zero means 1. With
	// 1, items arriving during a flush all wait for the next one (the
	// largest batches); more lets a database that commits concurrent
	// transactions together (PostgreSQL flushes its log for all of them
	// at once) overlap one flush's commit with the next one's statements.
	MaxInFlight int
}

// Batcher runs the flushes of Do's callers, at most MaxInFlight at once. A
// caller that finds fewer flushes running flushes the queue itself until
// its own item is answered; a goroutine flushes what is left, and exists
// only while items are queued, so an idle Batcher holds no goroutine and
// needs no Close to be released; Close only refuses new items and waits
// for the queued ones.
type Batcher[T, R any] struct {
	cfg     Config[T, R]
	mu      sync.Mutex
	queue   []*call[T, R]
	running int // flushing goroutines running
	closed  bool
	idle    chan struct{} // closed when the last goroutine ends; nil while none runs
}

type call[T, R any] struct {
	item T
	ctx  context.Context
	res  R
	err  error
	done chan struct{}
}

// New returns a Batcher; it returns an error naming every problem of cfg.
func New[T, R any](cfg Config[T, R]) (*Batcher[T, R], error) {
	var problems []error
	if cfg.Flush == nil {
		problems = append(problems, errors.New("a flush function is required"))
	}
	if cfg.MaxBatch < 1 {
		problems = append(problems, fmt.Errorf("max batch %d is below 1", cfg.MaxBatch))
	}
	if cfg.Timeout <= 0 {
		problems = append(problems, fmt.Errorf("flush timeout %s is not positive", cfg.Timeout))
	}
	if cfg.MaxInFlight < 0 {
		problems = append(problems, fmt.Errorf("max in flight %d is negative", cfg.MaxInFlight))
	}
	cfg.MaxInFlight = max(cfg.MaxInFlight, 1)
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring group commit: %w", errors.Join(problems...))
	}
	return &Batcher[T, R]{cfg: cfg}, nil
}

// Do queues item for the next flush and waits for its result. It returns
// ctx's error when ctx ends first: the item is then dropped when it was not
// taken into a flush yet, and otherwise its flush goes on (the caller
// cannot know whether it was written). A failed flush answers *FlushError;
// after Close began, ErrClosed.
func (b *Batcher[T, R]) Do(ctx context.Context, item T) (R, error) {
	c := &call[T, R]{item: item, ctx: ctx, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		var zero R
		return zero, ErrClosed
	}
	b.queue = append(b.queue, c)
	lead := b.running < b.cfg.MaxInFlight
	if lead {
		if b.running == 0 {
			b.idle = make(chan struct{})
		}
		b.running++
	}
	idle := b.idle
	b.mu.Unlock()
	if lead {
		// The caller flushes itself (no goroutine switch when nothing
		// else is queued) until its own item is answered, then hands the
		// rest of the queue to a goroutine.
		b.runUntil(c, idle)
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

// Queued returns how many items wait for a flush (not counting the ones of
// the flush in flight).
func (b *Batcher[T, R]) Queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// run flushes the queue batch by batch until it is empty, then ends; the
// last runner to end closes idle.
func (b *Batcher[T, R]) run(idle chan struct{}) { b.runUntil(nil, idle) }

// runUntil flushes the queue batch by batch until it is empty or, when own
// is not nil, until own is answered: then a goroutine takes over what is
// still queued. One of b.running; b.mu is not held.
func (b *Batcher[T, R]) runUntil(own *call[T, R], idle chan struct{}) {
	for {
		b.mu.Lock()
		if own != nil && own.answered() && len(b.queue) > 0 {
			b.mu.Unlock()
			go b.run(idle)
			return
		}
		batch := b.take()
		if batch == nil {
			b.running--
			if b.running == 0 {
				close(idle)
			}
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.flush(batch)
	}
}

// answered reports whether c's result is set.
func (c *call[T, R]) answered() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// take removes the next batch from the queue, skipping callers that gave
// up; nil when nothing is left. b.mu is held.
func (b *Batcher[T, R]) take() []*call[T, R] {
	var batch []*call[T, R]
	n := 0
	for n < len(b.queue) && len(batch) < b.cfg.MaxBatch {
		c := b.queue[n]
		n++
		if c.ctx.Err() == nil {
			batch = append(batch, c)
		}
	}
	clear(b.queue[:n])
	b.queue = b.queue[n:]
	if len(b.queue) == 0 {
		b.queue = nil
	}
	return batch
}

// flush writes one batch and answers each of its callers.
func (b *Batcher[T, R]) flush(batch []*call[T, R]) {
	items := make([]T, len(batch))
	for i, c := range batch {
		items[i] = c.item
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	out, err := b.safeFlush(ctx, items)
	cancel()
	if err == nil && len(out) != len(batch) {
		err = fmt.Errorf("flush answered %d results for %d items", len(out), len(batch))
	}
	for i, c := range batch {
		if err != nil {
			c.err = &FlushError{Size: len(batch), Err: err}
		} else {
			c.res = out[i]
		}
		close(c.done)
	}
}

// safeFlush turns a panic of the flush into its error (guard.Call), so
// that no caller waits forever and the next batch still runs: a flush may
// run in the Batcher's own goroutine, under no HTTP or job guard.
func (b *Batcher[T, R]) safeFlush(ctx context.Context, items []T) (out []R, err error) {
	err = guard.Call(func() error {
		var ferr error
		out, ferr = b.cfg.Flush(ctx, items)
		return ferr
	})
	return out, err // a panic's *guard.PanicError ("panic: ...") is the whole flush's error
}

// Close refuses new items (Do answers ErrClosed) and waits until every
// queued item was flushed, or ctx ends (its error is returned). Shutdown
// calls it after the HTTP server stopped taking requests.
func (b *Batcher[T, R]) Close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	idle := b.idle
	running := b.running > 0
	b.mu.Unlock()
	if !running {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("draining group commit: %w", ctx.Err())
	}
}
