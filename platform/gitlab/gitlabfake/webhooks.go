package gitlabfake

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Webhook event names (X-Gitlab-Event).
const (
	EventMergeRequest = "Merge Request Hook"
	EventPipeline     = "Pipeline Hook"
	EventNote         = "Note Hook"
)

// userAgent is the User-Agent GitLab sends ("GitLab/<version>").
const userAgent = "GitLab/17.6.0"

// SentWebhook is one delivery attempt (or a dropped event), in the order
// they happened.
type SentWebhook struct {
	// Event is the X-Gitlab-Event header, for example "Merge Request Hook".
	Event string
	// IdempotencyKey is stable per event; a chaos duplicate reuses it.
	IdempotencyKey string
	// WebhookUUID is X-Gitlab-Webhook-UUID, new for every attempt.
	WebhookUUID string
	// EventUUID is X-Gitlab-Event-UUID, one per event.
	EventUUID string
	// ProjectID is the project the event belongs to.
	ProjectID int64
	// Body is the JSON payload.
	Body []byte
	// Status is the receiver's HTTP status, 0 when dropped or on a
	// transport error.
	Status int
	// Dropped is true when chaos dropped the event (never sent).
	Dropped bool
	// Duplicate is true for the extra copy chaos sent.
	Duplicate bool
	// Err is the transport error text, "" when an answer came back.
	Err string
	// Answer is the receiver's answer body (its first 8 KiB), as GitLab
	// shows it in the webhook's recent events.
	Answer []byte
}

// WebhookChaos makes delivery unreliable the way GitLab's can be
// (GITLAB-FACTS §1.2). Each rate is a probability in [0, 1] drawn once per
// event from a generator seeded with Seed, so runs are repeatable.
type WebhookChaos struct {
	// DuplicateRate: the event is sent a second time (same Idempotency-Key
	// and X-Gitlab-Event-UUID, new X-Gitlab-Webhook-UUID), queued behind
	// the events already waiting.
	DuplicateRate float64
	// ReorderRate: the next queued event overtakes this one (no effect
	// when nothing else is queued; PauseWebhooks lets a test queue several).
	ReorderRate float64
	// DropRate: the event is never sent; it is recorded with Dropped.
	DropRate float64
	// Seed seeds the generator.
	Seed int64
}

type hookEvent struct {
	event, key, eventUUID string
	projectID             int64
	body                  []byte
	dup, decided          bool
	overtook              bool // moved ahead by a reorder: not reordered itself
}

type hookQueue struct {
	cond     *sync.Cond
	queue    []*hookEvent
	inflight int
	sent     []SentWebhook
	chaos    WebhookChaos
	rng      *mrand.Rand
	paused   bool
	wg       sync.WaitGroup
	client   *http.Client
	senders  int // deliverLoop goroutines running
}

func (s *Server) startHooks() {
	s.hooks.cond = sync.NewCond(&s.mu)
	s.hooks.client = &http.Client{Timeout: 10 * time.Second} // GitLab.com's webhook timeout
	if s.opts.WebhookURL == "" {
		return
	}
	s.hooks.senders = 1
	s.hooks.wg.Add(1)
	go s.deliverLoop()
}

// SetWebhookSenders delivers queued events with n concurrent senders (at
// least the one the server starts with; fewer than running is a no-op), as
// GitLab does: each event is a job of its own (WebHookWorker on Sidekiq), so
// a busy instance sends a project's events concurrently and in no promised
// order (docs/gitlab.md, webhooks). With one sender (the default) events go out
// one at a time in order, which a fast burst of events turns into a queue
// of the fake's own: BenchmarkChanges200 uses several.
func (s *Server) SetWebhookSenders(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.WebhookURL == "" || s.closed {
		return
	}
	for ; s.hooks.senders < n; s.hooks.senders++ {
		s.hooks.wg.Add(1)
		go s.deliverLoop()
	}
}

// SetWebhookChaos sets the chaos for events not yet delivered. The zero
// value turns it off.
func (s *Server) SetWebhookChaos(c WebhookChaos) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.chaos = c
	s.hooks.rng = mrand.New(mrand.NewPCG(uint64(c.Seed), uint64(c.Seed)^0x9e3779b97f4a7c15))
}

// PauseWebhooks holds deliveries in the queue (events keep being queued),
// as when the receiver is down; ResumeWebhooks sends them.
func (s *Server) PauseWebhooks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.paused = true
}

// ResumeWebhooks restarts deliveries held by PauseWebhooks.
func (s *Server) ResumeWebhooks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.paused = false
	s.hooks.cond.Broadcast()
}

// Webhooks returns every delivery attempt and dropped event so far.
func (s *Server) Webhooks() []SentWebhook {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hooks.sent)
}

// Flush waits until every webhook queued so far was delivered or dropped
// (pipelines still running may queue more later; see WaitIdle).
func (s *Server) Flush(ctx context.Context) error {
	return s.waitFor(ctx, func() bool { return s.hooksIdle() })
}

// WaitIdle waits until no scripted work is pending (pipelines that will
// finish, rebases that will end) and every webhook was delivered or
// dropped. Pipelines scripted "running" and rebases StuckForever never end
// and do not count.
func (s *Server) WaitIdle(ctx context.Context) error {
	return s.waitFor(ctx, func() bool { return s.pending == 0 && s.hooksIdle() })
}

func (s *Server) hooksIdle() bool {
	return s.closed || s.opts.WebhookURL == "" || (len(s.hooks.queue) == 0 && s.hooks.inflight == 0)
}

func (s *Server) waitFor(ctx context.Context, done func() bool) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		ok := done()
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the fake GitLab to be idle: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// enqueue queues a payload for delivery (under s.mu).
func (s *Server) enqueue(event string, projectID int64, body []byte) {
	if s.opts.WebhookURL == "" || s.closed {
		return
	}
	s.hooks.queue = append(s.hooks.queue, &hookEvent{
		event: event, key: newUUID(), eventUUID: newUUID(), projectID: projectID, body: body,
	})
	s.hooks.cond.Signal()
}

// deliverLoop sends queued events one at a time, in order, applying chaos
// (each of SetWebhookSenders' senders runs one).
func (s *Server) deliverLoop() {
	defer s.hooks.wg.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	h := &s.hooks
	for {
		for !s.closed && (len(h.queue) == 0 || h.paused) {
			h.cond.Wait()
		}
		if s.closed {
			return
		}
		ev := h.queue[0]
		h.queue = h.queue[1:]
		if !ev.decided && !ev.dup && h.rng != nil {
			ev.decided = true
			drop, reorder, dup := h.rng.Float64(), h.rng.Float64(), h.rng.Float64()
			if drop < h.chaos.DropRate {
				h.sent = append(h.sent, SentWebhook{Event: ev.event, IdempotencyKey: ev.key, EventUUID: ev.eventUUID,
					ProjectID: ev.projectID, Body: ev.body, Dropped: true})
				continue
			}
			if dup < h.chaos.DuplicateRate {
				c := *ev
				c.dup = true
				h.queue = append(h.queue, &c)
			}
			if reorder < h.chaos.ReorderRate && len(h.queue) > 0 && !ev.overtook {
				// The next event overtakes this one and may not swap back.
				h.queue[0].overtook = true
				h.queue = slices.Insert(h.queue, 1, ev)
				continue
			}
		}
		h.inflight++
		s.mu.Unlock()
		rec := s.send(ev)
		s.mu.Lock()
		h.inflight--
		h.sent = append(h.sent, rec)
	}
}

// send POSTs one attempt with GitLab's delivery headers
// (app/services/web_hook_service.rb build_headers).
func (s *Server) send(ev *hookEvent) SentWebhook {
	rec := SentWebhook{Event: ev.event, IdempotencyKey: ev.key, WebhookUUID: newUUID(), EventUUID: ev.eventUUID,
		ProjectID: ev.projectID, Body: ev.body, Duplicate: ev.dup}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, s.opts.WebhookURL, bytes.NewReader(ev.body))
	if err != nil {
		rec.Err = err.Error()
		return rec
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("X-Gitlab-Event", ev.event)
	req.Header.Set("X-Gitlab-Instance", s.baseURL())
	req.Header.Set("X-Gitlab-Webhook-UUID", rec.WebhookUUID)
	req.Header.Set("X-Gitlab-Event-UUID", ev.eventUUID)
	req.Header.Set("Idempotency-Key", ev.key)
	if s.opts.WebhookSecret != "" {
		req.Header.Set("X-Gitlab-Token", s.opts.WebhookSecret)
	}
	resp, err := s.hooks.client.Do(req)
	if err != nil {
		rec.Err = err.Error()
		s.log.Debug("webhook delivery failed", "event", ev.event, "error", err)
		return rec
	}
	rec.Answer, _ = io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	_ = resp.Body.Close()
	rec.Status = resp.StatusCode
	s.log.Debug("webhook delivered", "event", ev.event, "status", resp.StatusCode)
	return rec
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
