package routing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"changebot/flows"
	"changebot/flows/rules"
	"changebot/platform"
	"changebot/store"
)

// HookDecoder decodes a stored webhook body (the bot's one decoding path,
// platform/gitlab.DecodeHook).
type HookDecoder func(event string, body []byte) (platform.HookEvent, error)

// FlowHooks applies pipeline and merge request events (implemented by
// *flows.Engine).
type FlowHooks interface {
	ApplyHook(ctx context.Context, deliveryID int64, ev platform.HookEvent) (outcome string, err error)
}

// NoteHandler runs the commands of an MR comment (implemented by
// *commands.Executor).
type NoteHandler interface {
	HandleNote(ctx context.Context, deliveryID int64, ev platform.HookEvent) (outcome string, err error)
}

// DeliveryStore reads stored deliveries and records their outcome
// (implemented by *postgres.Store).
type DeliveryStore interface {
	DB() store.DBTX
	GetDelivery(ctx context.Context, db store.DBTX, id int64) (store.Delivery, error)
	MarkDeliveryProcessed(ctx context.Context, db store.DBTX, id int64, outcome string) error
}

// RouterConfig wires a Router. Every field but Logger is required. A
// panic of the job is the job guard's (internal/guard.Jobs, River worker
// middleware).
type RouterConfig struct {
	Store  DeliveryStore
	Decode HookDecoder
	Flow   FlowHooks
	Notes  NoteHandler
	Logger *slog.Logger
}

// Router runs the process_delivery job (flows.ProcessDeliveryArgs, enqueued
// by the webhook intake in the transaction that stores the delivery).
type Router struct {
	cfg RouterConfig
	log *slog.Logger
}

// NewRouter validates cfg and returns a router.
func NewRouter(cfg RouterConfig) (*Router, error) {
	var errs []error
	if cfg.Store == nil {
		errs = append(errs, errors.New("store is required"))
	}
	if cfg.Decode == nil {
		errs = append(errs, errors.New("webhook decoder is required"))
	}
	if cfg.Flow == nil {
		errs = append(errs, errors.New("flow is required"))
	}
	if cfg.Notes == nil {
		errs = append(errs, errors.New("note handler is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("configuring the delivery router: %w", err)
	}
	r := &Router{cfg: cfg, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// AddWorker registers the delivery job's worker on workers.
func (r *Router) AddWorker(workers *river.Workers) { river.AddWorker(workers, r.Worker()) }

// Worker returns the delivery job's worker (AddWorker registers it; the
// in-process flow harness works it without a River client).
func (r *Router) Worker() river.Worker[rules.ProcessDeliveryArgs] { return &deliveryWorker{r: r} }

// Log attribute keys (STYLE 9).
const (
	attrDeliveryID = "delivery_id"
	attrJobKind    = "job_kind"
)

// outcomeUndecodable is recorded on a stored delivery that no longer
// decodes (it is not retried).
const outcomeUndecodable = "undecodable"

type deliveryWorker struct {
	river.WorkerDefaults[rules.ProcessDeliveryArgs]
	r *Router
}

// Work implements river.Worker: read the stored delivery, decode it, route
// it and record its outcome. A delivery that is gone is done; one that does
// not decode is recorded as undecodable; an error of the flow or the
// commands makes River retry the job.
func (w *deliveryWorker) Work(ctx context.Context, job *river.Job[rules.ProcessDeliveryArgs]) error {
	r := w.r
	id := job.Args.DeliveryID
	log := r.log.With(attrDeliveryID, id, attrJobKind, rules.KindProcessDelivery)
	st := r.cfg.Store
	d, err := st.GetDelivery(ctx, st.DB(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading delivery %d: %w", id, err)
	}
	ev, err := r.cfg.Decode(d.Event, d.Body)
	if err != nil {
		log.Error("stored delivery does not decode", "err", err)
		return st.MarkDeliveryProcessed(ctx, st.DB(), d.ID, outcomeUndecodable)
	}
	if n, _ := snoozeCount(job.JobRow); n > 0 {
		// Snoozed before, most likely as an early webhook: applied
		// again, it makes no call its first application made.
		ctx = flows.AsEarlyRepeat(ctx)
	}
	outcome, err := r.Route(ctx, d.ID, ev)
	if errors.Is(err, flows.ErrEarlyHook) {
		if wait, ok := earlyHookWait(job.JobRow); ok {
			// The change is about to enter the wait this webhook
			// answers: apply it again then, instead of leaving the
			// wait to its first poll (issue 12 point 2).
			log.Debug("webhook came before its wait: delivery waits", "wait", wait)
			return river.JobSnooze(wait)
		}
		outcome, err = r.Route(flows.WithoutEarlyWait(ctx), d.ID, ev)
	}
	if wait, ok := platform.RateLimitWait(err); ok {
		// Applied once GitLab's rate limit ends; a snooze uses up no
		// attempt (issue 10 point 4).
		log.Info("gitlab rate limit: delivery waits", "wait", wait)
		return river.JobSnooze(wait)
	}
	if err != nil {
		return fmt.Errorf("applying delivery %d: %w", d.ID, err)
	}
	log.Debug("delivery processed", "outcome", outcome, "event", d.Event)
	return st.MarkDeliveryProcessed(ctx, st.DB(), d.ID, outcome)
}

// Early webhooks (flows.ErrEarlyHook) are applied again after
// EarlyHookFirstWait, doubling each time, EarlyHookSnoozes times at most:
// 250 ms, 500 ms, 1 s, 2 s, 3.75 s in all, enough for the job that moves the
// change into its wait to commit (it is running when the webhook comes),
// and short of the wait's first poll (15 s by default). Then the delivery
// is applied as it stands (flows.WithoutEarlyWait) and the wait's poll
// finds what it missed.
const (
	EarlyHookFirstWait = 250 * time.Millisecond
	EarlyHookSnoozes   = 4
)

// earlyHookWait returns how long an early delivery's job waits before it is
// worked again, and false once it has waited EarlyHookSnoozes times. The
// count is River's: the job's metadata "snoozes" (River counts every
// snooze of the job, a rate-limit wait's too, so the bound holds for both
// together).
func earlyHookWait(job *rivertype.JobRow) (time.Duration, bool) {
	n, _ := snoozeCount(job)
	if n >= EarlyHookSnoozes {
		return 0, false
	}
	return EarlyHookFirstWait << n, true
}

// snoozeCount returns how many times River snoozed job (its metadata
// "snoozes"; 0 and false without one).
func snoozeCount(job *rivertype.JobRow) (int, bool) {
	var meta struct {
		Snoozes *int `json:"snoozes"`
	}
	if job == nil || len(job.Metadata) == 0 || json.Unmarshal(job.Metadata, &meta) != nil || meta.Snoozes == nil {
		return 0, false
	}
	return *meta.Snoozes, true
}

// Route hands one decoded delivery to its owner: comments to the command
// executor, everything else to the flow. It returns the delivery's outcome.
func (r *Router) Route(ctx context.Context, deliveryID int64, ev platform.HookEvent) (string, error) {
	if ev.Note != nil {
		return r.cfg.Notes.HandleNote(ctx, deliveryID, ev)
	}
	return r.cfg.Flow.ApplyHook(ctx, deliveryID, ev)
}
