package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"changebot/platform"
	"changebot/store"
)

// intakeConfig is what both platforms' webhook handlers are configured
// with (GitLabConfig and GitHubConfig map onto it); the platform's own
// checks are the hookRules.
type intakeConfig struct {
	// platform names the handler in configuration errors ("GitLab").
	platform string
	// noSecret is the problem reported when no secret is configured.
	noSecret       string
	secrets        []string
	decode         HookDecoder
	store          DeliveryStore
	dispatcher     *Dispatcher
	maxBody        int64
	storeTimeout   time.Duration
	maxBatch       int
	maxInFlight    int
	logger         *slog.Logger
	metrics        *Metrics
	noteHasCommand func(body string) bool
}

// hookRules are what differs between the platforms' intake paths; the
// order of the steps is intake.ServeHTTP's.
type hookRules struct {
	// handler is the handler label of changebot_webhook_panics_total.
	handler string
	// eventHeader names the event of a delivery (X-Gitlab-Event).
	eventHeader string
	// label bounds an event to a metric label value.
	label func(event string) string
	// beforeBody, when set, checks what the headers alone carry (a token)
	// before the size of the body is: it answers and returns false to end
	// the request.
	beforeBody func(q *hookRequest) bool
	// afterBody, when set, checks the headers against the body read (a
	// signature) before it is decoded, as beforeBody does.
	afterBody func(q *hookRequest) bool
	// ignoreReason returns why a decoded event is not stored (an Ignored*
	// reason), "" when it is.
	ignoreReason func(ev platform.HookEvent, hasCommand func(body string) bool) string
	// dedupeKey returns the delivery's store.Delivery.DedupeKey.
	dedupeKey func(q *hookRequest) string
}

// intake is the request path both webhook handlers share: method,
// authentication, body size, decode, the platform's ignore rules, one
// store call through the group commit, and a small JSON answer, each
// answer counted in changebot_webhook_deliveries_total.
type intake struct {
	cfg       intakeConfig
	rules     hookRules
	m         *Metrics
	log       *slog.Logger
	committer *deliveryCommitter
}

// newIntake checks cfg, listing every problem (with the platform's own,
// more) in the error, and applies the defaults of its zero fields.
func newIntake(cfg intakeConfig, rules hookRules, more ...error) (*intake, error) {
	var problems []error
	if len(cfg.secrets) == 0 {
		problems = append(problems, errors.New(cfg.noSecret))
	}
	for i, s := range cfg.secrets {
		if s == "" {
			problems = append(problems, fmt.Errorf("webhook secret %d is empty", i+1))
		}
	}
	problems = append(problems, more...)
	if cfg.decode == nil {
		problems = append(problems, errors.New("a hook decoder is required"))
	}
	if cfg.store == nil {
		problems = append(problems, errors.New("a delivery store is required"))
	}
	if cfg.maxBody < 0 {
		problems = append(problems, fmt.Errorf("max body bytes is negative (%d)", cfg.maxBody))
	}
	if cfg.storeTimeout < 0 {
		problems = append(problems, fmt.Errorf("store timeout is negative (%s)", cfg.storeTimeout))
	}
	if cfg.maxBatch < 0 {
		problems = append(problems, fmt.Errorf("max batch is negative (%d)", cfg.maxBatch))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the %s webhook handler: %w", cfg.platform, errors.Join(problems...))
	}
	if cfg.maxBody == 0 {
		cfg.maxBody = DefaultMaxBodyBytes
	}
	if cfg.storeTimeout == 0 {
		cfg.storeTimeout = DefaultStoreTimeout
	}
	in := &intake{cfg: cfg, rules: rules, m: orNew(cfg.metrics), log: cfg.logger}
	if in.log == nil {
		in.log = slog.New(slog.DiscardHandler)
	}
	c, err := newDeliveryCommitter(cfg.store, cfg.dispatcher, in.m, cfg.maxBatch, cfg.maxInFlight, cfg.storeTimeout)
	if err != nil {
		return nil, fmt.Errorf("configuring the %s webhook handler: %w", cfg.platform, err)
	}
	in.committer = c
	return in, nil
}

// hookRequest is one delivery on its way through intake.ServeHTTP.
type hookRequest struct {
	w     http.ResponseWriter
	r     *http.Request
	event string
	// body is the raw body, set once it was read.
	body []byte
	// log carries the event label and what the steps learnt (the steps may
	// add to it).
	log *slog.Logger
	m   *Metrics
	// label is the event's metric label.
	label string
}

// count counts the request's answer in changebot_webhook_deliveries_total.
func (q *hookRequest) count(outcome string) { q.m.deliveries.WithLabelValues(q.label, outcome).Inc() }

// refuse answers status with {"error": msg} and counts outcome; the
// caller logs why.
func (q *hookRequest) refuse(status int, outcome, msg string) {
	q.count(outcome)
	writeJSON(q.w, status, answer{Error: msg})
}

// ignore answers 200 {"result":"ignored"} and counts it, with reason in
// changebot_webhook_ignored_total.
func (q *hookRequest) ignore(reason string, attrs ...any) {
	q.count(OutcomeIgnored)
	q.m.ignored.WithLabelValues(reason).Inc()
	q.log.Debug("webhook ignored", append([]any{"reason", reason}, attrs...)...)
	writeJSON(q.w, http.StatusOK, answer{Result: OutcomeIgnored})
}

// Close stops the group commit after the HTTP server stopped taking
// requests: deliveries arriving later answer 503, and Close waits until
// every queued delivery is committed and answered, or ctx ends (its error
// is returned).
func (in *intake) Close(ctx context.Context) error { return in.committer.Close(ctx) }

// ServeHTTP checks, in order: method POST (405); rules.beforeBody; body
// size (413); the body read (400); rules.afterBody; decode (400 for a body
// wrapping platform.ErrMalformedHook, with its text, 500 for any other
// decoder error);
// rules.ignoreReason (200 ignored); then stores the delivery (503 when that
// fails, 200 duplicate or accepted). A panic is the HTTP guard's (500,
// onPanic).
func (in *intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	event := r.Header.Get(in.rules.eventHeader)
	q := &hookRequest{w: w, r: r, event: event, m: in.m, label: in.rules.label(event)}
	q.log = in.log.With(attrEvent, q.label)
	onPanic(r, in.m, in.rules.handler, func() { q.count(OutcomeError) })

	if r.Method != http.MethodPost {
		q.count(OutcomeMalformed)
		methodNotAllowed(w)
		return
	}
	if in.rules.beforeBody != nil && !in.rules.beforeBody(q) {
		return
	}
	if limitBody(w, r, in.cfg.maxBody) {
		in.tooLarge(q)
		return
	}
	body, tooLarge, err := readBody(r)
	if tooLarge {
		in.tooLarge(q)
		return
	}
	if err != nil {
		q.log.Warn("webhook refused: body unreadable", attrError, err)
		q.refuse(http.StatusBadRequest, OutcomeMalformed, "reading the request body failed")
		return
	}
	q.body = body
	if in.rules.afterBody != nil && !in.rules.afterBody(q) {
		return
	}
	ev, err := in.cfg.decode(event, body)
	if err != nil {
		if !errors.Is(err, platform.ErrMalformedHook) {
			// A decoder that breaks its contract is a bug of ours, not the sender's.
			q.count(OutcomeError)
			q.log.Error("webhook not decoded: decoder failed", attrError, err)
			writeJSON(w, http.StatusInternalServerError, answer{Error: "decoding the payload failed"})
			return
		}
		q.log.Warn("webhook refused: malformed payload", attrError, err)
		// The adapter's text says it is malformed, and which event
		// (platform.MalformedHook): said once.
		q.refuse(http.StatusBadRequest, OutcomeMalformed, err.Error())
		return
	}
	q.log = q.log.With(attrProjectID, ev.ProjectID)
	if reason := in.rules.ignoreReason(ev, in.cfg.noteHasCommand); reason != "" {
		q.ignore(reason, "kind", ev.Kind)
		return
	}
	d := store.Delivery{DedupeKey: in.rules.dedupeKey(q), Event: event, ProjectID: ev.ProjectID, Body: body}
	ctx, cancel := detached(r, in.cfg.storeTimeout)
	defer cancel()
	res, err := in.committer.commit(ctx, q.log, d)
	switch {
	case err != nil:
		q.count(OutcomeError)
		q.log.Error("webhook not stored", attrError, err)
		writeJSON(w, http.StatusServiceUnavailable, answer{Error: "storing the delivery failed; it was not accepted"})
	case !res.Inserted:
		q.count(OutcomeDuplicate)
		q.log.Debug("webhook duplicate", attrOutcome, OutcomeDuplicate)
		writeJSON(w, http.StatusOK, answer{Result: OutcomeDuplicate})
	default:
		q.count(OutcomeAccepted)
		q.log.Debug("webhook accepted", attrDeliveryID, res.ID) // the access line is the info one
		writeJSON(w, http.StatusOK, answer{Result: OutcomeAccepted, DeliveryID: res.ID})
	}
}

func (in *intake) tooLarge(q *hookRequest) {
	q.log.Warn("webhook refused: body too large", "content_length", q.r.ContentLength, "limit", in.cfg.maxBody)
	q.refuse(http.StatusRequestEntityTooLarge, OutcomeTooLarge, fmt.Sprintf("payload larger than %d bytes", in.cfg.maxBody))
}
