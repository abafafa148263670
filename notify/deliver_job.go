package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"changebot/platform"
	"changebot/store"
)

// KindDeliver is the job kind of one notification to one destination
// (persisted in river_job.kind: never rename it).
const KindDeliver = "deliver_notification"

// QueueNotifications is the River queue of the notification jobs, apart
// from the steps and the status comments so that a slow destination never
// holds a change back.
const QueueNotifications = "notifications"

// MaxAttempts bounds the attempts of one delivery: the job's River
// attempts (retried on the flow's RetryPolicy: 1 s doubling to 2 minutes,
// about 20 minutes in all) and the attempts the delivery log counts (a
// Retry-After snoozes the job without spending a River attempt).
const MaxAttempts = 15

// MaxRetryAfter caps how long a destination's Retry-After may hold a
// delivery back at once.
const MaxRetryAfter = 10 * time.Minute

// RequestTimeout bounds one POST to a destination.
const RequestTimeout = 10 * time.Second

// The headers of a delivery (docs/notifications.md).
const (
	HeaderEvent     = "X-Changebot-Event"
	HeaderDelivery  = "X-Changebot-Delivery"
	HeaderTimestamp = "X-Changebot-Timestamp"
	HeaderSignature = "X-Changebot-Signature"
)

// Log attribute keys (STYLE 9).
const (
	attrOperationID = "operation_id"
	attrDeliveryID  = "delivery_id"
	attrDestination = "destination"
)

// DeliverArgs are the arguments of one notification job: the destination
// by name (its URL and secret are read from the configuration when the job
// runs, never stored) and the payload built when the move committed.
type DeliverArgs struct {
	Destination string  `json:"destination"`
	Payload     Payload `json:"payload"`
}

// Kind implements river.JobArgs.
func (DeliverArgs) Kind() string { return KindDeliver }

// Router routes events to the configured destinations.
type Router struct {
	dests  []Destination
	byName map[string]Destination
}

// NewRouter returns the router of dests, which it validates
// (ValidateDestinations): an error lists every problem.
func NewRouter(dests []Destination) (*Router, error) {
	if ps := ValidateDestinations(dests); len(ps) > 0 {
		errs := make([]error, len(ps))
		for i, p := range ps {
			errs[i] = errors.New(p)
		}
		return nil, fmt.Errorf("configuring notifications: %w", errors.Join(errs...))
	}
	r := &Router{dests: dests, byName: make(map[string]Destination, len(dests))}
	for _, d := range dests {
		r.byName[d.Name] = d
	}
	return r, nil
}

// Destinations returns the router's destinations in configuration order.
func (r *Router) Destinations() []Destination { return r.dests }

// Jobs returns the notification jobs of the move that wrote op and
// appended event e: one per destination that wants the move's event for
// op's project, none for an event that is not a transition, for a move
// that raises no event (MoveEvent) or for a change of a rollout (its
// rollout's summary tells it instead: RolloutNotice). It is meant for
// store.TransitionParams.EventJobsFunc: the jobs commit with the move.
func (r *Router) Jobs(op store.Operation, e store.Event) []river.InsertManyParams {
	return r.JobsRouted(op, e, nil)
}

// DeliveryLog is what the worker needs of the store: the delivery log's
// write (implemented by store.DriverStore).
type DeliveryLog interface {
	DB() store.DBTX
	RecordNotificationAttempt(ctx context.Context, db store.DBTX, a store.NotificationAttempt) (store.NotificationDelivery, error)
}

// WorkerConfig wires a Worker.
type WorkerConfig struct {
	Router *Router
	Log    DeliveryLog
	// Client sends the POSTs; nil means a client with RequestTimeout.
	Client *http.Client
	Logger *slog.Logger
	// NowFunc is the clock of X-Changebot-Timestamp; nil means time.Now.
	NowFunc func() time.Time
	// Registerer receives changebot_notifications_total; nil registers
	// it nowhere (tests).
	Registerer prometheus.Registerer
}

// Worker is the River worker of KindDeliver: it POSTs one notification and
// records the attempt in the delivery log. A 2xx is delivered; a 5xx, a
// 429 or no answer is retried (after the destination's Retry-After when
// it gives one, else on the client's retry policy) until MaxAttempts; any
// other answer (a 4xx) is recorded as failed and not retried.
type Worker struct {
	river.WorkerDefaults[DeliverArgs]
	cfg WorkerConfig
	// attempts counts the attempts by destination, event and state
	// (changebot_notifications_total).
	attempts *prometheus.CounterVec
}

// NewWorker checks cfg and returns the worker.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if cfg.Router == nil || cfg.Log == nil {
		return nil, errors.New("configuring the notification worker: router and delivery log are required")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: RequestTimeout}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NowFunc == nil {
		cfg.NowFunc = time.Now
	}
	w := &Worker{cfg: cfg, attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "changebot_notifications_total",
		Help: "Notification delivery attempts by destination, event and the state they left the delivery in (delivered, retrying, failed).",
	}, []string{"destination", "event", "state"})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(w.attempts); err != nil {
			return nil, fmt.Errorf("registering the notification metrics: %w", err)
		}
	}
	return w, nil
}

// AddWorker registers the worker with River.
func (w *Worker) AddWorker(workers *river.Workers) { river.AddWorker(workers, w) }

// Timeout implements river.Worker: one POST and one write.
func (w *Worker) Timeout(*river.Job[DeliverArgs]) time.Duration {
	return RequestTimeout + 20*time.Second
}

// Work implements river.Worker.
func (w *Worker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	a := job.Args
	log := w.cfg.Logger.With(attrOperationID, a.Payload.OperationID, attrDeliveryID, a.Payload.IdempotencyKey, attrDestination, a.Destination)
	attempt := store.NotificationAttempt{Destination: a.Destination, Event: string(a.Payload.Event),
		OperationID: a.Payload.OperationID, DeliveryKey: a.Payload.IdempotencyKey}
	d, ok := w.cfg.Router.byName[a.Destination]
	if !ok {
		attempt.State, attempt.Error = store.NotificationFailed, "the destination is no longer configured"
		w.attempts.WithLabelValues(a.Destination, string(a.Payload.Event), attempt.State).Inc()
		if _, err := w.cfg.Log.RecordNotificationAttempt(ctx, w.cfg.Log.DB(), attempt); err != nil {
			return err
		}
		log.Warn("notification dropped: destination not configured")
		return river.JobCancel(fmt.Errorf("delivering %s: destination %q is not configured", a.Payload.IdempotencyKey, a.Destination))
	}
	status, retryAfter, sendErr := w.send(ctx, d, a.Payload)
	attempt.StatusCode = status
	retry := false
	switch {
	case sendErr == nil && status >= 200 && status < 300:
		attempt.State = store.NotificationDelivered
	case sendErr != nil || status == http.StatusTooManyRequests || status >= 500:
		attempt.State, retry = store.NotificationRetrying, true
	default:
		attempt.State = store.NotificationFailed
	}
	if sendErr != nil {
		attempt.Error = sendErr.Error()
	} else if attempt.State != store.NotificationDelivered {
		attempt.Error = fmt.Sprintf("the destination answered %d", status)
	}
	if tries := job.Attempt + snoozes(job.Metadata); retry && (tries >= MaxAttempts || (job.MaxAttempts > 0 && job.Attempt >= job.MaxAttempts)) {
		attempt.State, retry = store.NotificationFailed, false
		attempt.Error = fmt.Sprintf("%s; gave up after %d attempts", attempt.Error, tries)
	}
	w.attempts.WithLabelValues(a.Destination, string(a.Payload.Event), attempt.State).Inc()
	rec, err := w.cfg.Log.RecordNotificationAttempt(ctx, w.cfg.Log.DB(), attempt)
	if err != nil {
		// Retried: the receiver may see the delivery twice, with one key.
		return err
	}
	switch {
	case attempt.State == store.NotificationDelivered:
		log.Info("notification delivered", "event", a.Payload.Event, "status", status, "attempts", rec.Attempts)
		return nil
	case retry && retryAfter > 0:
		log.Warn("notification deferred", "status", status, "retry_after", retryAfter.String(), "attempts", rec.Attempts)
		return river.JobSnooze(retryAfter)
	case retry:
		log.Warn("notification failed, retrying", "status", status, "err", attempt.Error, "attempts", rec.Attempts)
		return fmt.Errorf("delivering %s to %s: %s", a.Payload.IdempotencyKey, a.Destination, attempt.Error)
	default:
		log.Error("notification failed", "status", status, "err", attempt.Error, "attempts", rec.Attempts)
		return river.JobCancel(fmt.Errorf("delivering %s to %s: %s", a.Payload.IdempotencyKey, a.Destination, attempt.Error))
	}
}

// send POSTs p to d and returns the status it answered (0: none), its
// Retry-After (0: none or unusable) and an error when there was no answer,
// which names neither the URL nor the secret.
func (w *Worker) send(ctx context.Context, d Destination, p Payload) (int, time.Duration, error) {
	var body []byte
	var err error
	if d.Kind == KindSlack {
		body, err = json.Marshal(map[string]string{"text": SlackText(p)})
	} else {
		body, err = json.Marshal(p)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("encoding the payload: %w", err)
	}
	now := w.cfg.NowFunc()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, errors.New("building the request failed (check the destination's url)")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "changebot-notifications")
	req.Header.Set(HeaderEvent, string(p.Event))
	req.Header.Set(HeaderDelivery, p.IdempotencyKey)
	if d.Kind == KindWebhook {
		ts := now.Unix()
		req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(HeaderSignature, Sign(d.Secret, ts, body))
	}
	resp, err := w.cfg.Client.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("posting to the destination: %w", withoutURL(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, retryAfter(resp.Header, now), nil
}

// snoozes is the number of times River snoozed the job (its metadata's
// "snoozes"): a Retry-After snoozes it without spending a River attempt,
// so the attempts made are job.Attempt plus this.
func snoozes(metadata []byte) int {
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	if len(metadata) == 0 || json.Unmarshal(metadata, &m) != nil {
		return 0
	}
	return m.Snoozes
}

// withoutURL is err without the URL a *url.Error quotes (a Slack URL is a
// credential).
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return errors.New("no answer in time")
		}
		return ue.Err
	}
	return err
}

// retryAfter is the wait a Retry-After header of h asks for
// (platform.RetryAfterHeader: seconds or an HTTP date), capped at
// MaxRetryAfter; 0 when absent, unusable or past.
func retryAfter(h http.Header, now time.Time) time.Duration {
	d, _ := platform.RetryAfterHeader(h, now)
	return min(d, MaxRetryAfter)
}
