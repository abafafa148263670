package webhooks

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/riverqueue/river"

	"changebot/platform"
	"changebot/store"
)

// GitLab delivery headers (GITLAB-FACTS §1.1).
const (
	headerGitLabToken    = "X-Gitlab-Token"
	headerGitLabEvent    = "X-Gitlab-Event"
	headerIdempotencyKey = "Idempotency-Key"
)

// maxIdempotencyKeyLen bounds an Idempotency-Key used as it is in the
// dedupe key; GitLab sends a UUID. A longer one is hashed so that the unique
// index never sees an oversized value.
const maxIdempotencyKeyLen = 128

// DeliveryStore stores a batch of deliveries and enqueues the processing job
// of each one stored, in one transaction (store.Store implements it). out[i]
// answers ds[i]: Inserted is false, and nothing is written for it, when its
// DedupeKey was stored before (or earlier in ds).
type DeliveryStore interface {
	InsertDeliveries(ctx context.Context, ds []store.Delivery, job func(id int64) river.InsertManyParams) (out []store.DeliveryInsert, err error)
}

// HookDecoder decodes a GitLab delivery (platform/gitlab.DecodeHook, the
// bot's one decoding path). Its error wraps platform.ErrMalformedHook for a
// body that cannot be read.
type HookDecoder func(event string, body []byte) (platform.HookEvent, error)

// GitLabConfig configures NewGitLabHandler.
type GitLabConfig struct {
	// Secrets are the accepted X-Gitlab-Token values; at least one, none
	// empty. Several allow rotating the secret without downtime. They never
	// appear in logs, errors or answers.
	Secrets []string
	// MaxBodyBytes bounds a delivery; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Store stores deliveries and enqueues their jobs. Required.
	Store DeliveryStore
	// Dispatcher, when set, enqueues the jobs: Store must then also store
	// deliveries without their jobs (StoreDeliveries), which the intake
	// does with one autocommit statement before waking Dispatcher (issue
	// 12; bot sets it on PostgreSQL). Nil enqueues each batch's jobs in
	// its transaction.
	Dispatcher *Dispatcher
	// Decode decodes a delivery. Required.
	Decode HookDecoder
	// StoreTimeout bounds the store transaction, and a request's wait for
	// it; zero means DefaultStoreTimeout.
	StoreTimeout time.Duration
	// MaxBatch bounds the deliveries stored by one transaction (group
	// commit); zero means DefaultMaxBatch.
	MaxBatch int
	// MaxInFlight bounds the intake transactions committing at once; zero
	// means DefaultMaxInFlight.
	MaxInFlight int
	// Logger receives one record per delivery; nil discards.
	Logger *slog.Logger
	// Metrics counts deliveries; nil counts into unregistered metrics.
	Metrics *Metrics
	// NoteHasCommand reports whether a note's body may hold a command for
	// the bot (bot wires commands.MayHoldCommand; webhooks never import
	// commands, DESIGN §8). A note it answers false for is answered
	// ignored and not stored. Nil stores every note on a merge request.
	NoteHasCommand func(body string) bool
}

// NewGitLabHandler returns the handler of POST /webhooks/gitlab. It checks,
// in order (STYLE 19): method POST (else 405); body size (413 above
// MaxBodyBytes); X-Gitlab-Token against every secret in constant time
// (401 {"error":"invalid webhook token"}); X-Gitlab-Event present (400);
// the body decodes (400 {"error":"malformed payload: …"}, without the
// body; a decoder error not wrapping platform.ErrMalformedHook answers 500).
// Events that cannot move any change answer 200 {"result":"ignored"}, are
// not stored and are counted in changebot_webhook_ignored_total by Ignored*
// reason: kinds other than merge request, pipeline and note; notes on
// anything but a merge request; system notes; edited notes (a command runs
// once per note id, never on an edit: DESIGN §1); and notes without a
// command (GitLabConfig.NoteHasCommand; issue 12). Every other delivery is
// stored, deduplicated on "idem:"+Idempotency-Key (GitLab 17.4+, stable
// across resends) or else "sha256:"+hex(sha256(event+"\n"+body)), with its
// flows.ProcessDeliveryJob in one transaction (with GitLabConfig.Dispatcher,
// the delivery alone, by one autocommit statement, and the dispatcher
// enqueues the job after): 200
// {"result":"accepted","delivery_id":N}, or 200 {"result":"duplicate"}.
// Concurrent deliveries share that transaction (group commit: while
// MaxInFlight transactions commit, the next deliveries queue, and the next
// transaction takes up to MaxBatch of them); each request still gets its
// own answer. When a shared commit fails,
// each of its deliveries is stored again on its own, so one delivery the
// database refuses fails only its own request. A store failure answers 503:
// GitLab shows the failure (and may temporarily disable the hook), which is
// better than claiming a delivery that was not stored. A panic answers 500.
// Every answer is counted in changebot_webhook_deliveries_total.
//
// Close stops the group commit; the HTTP server must have stopped first.
//
// It returns an error, listing every problem, when cfg is invalid.
func NewGitLabHandler(cfg GitLabConfig) (*GitLabHandler, error) {
	var problems []error
	if len(cfg.Secrets) == 0 {
		problems = append(problems, errors.New("at least one webhook secret is required"))
	}
	secrets := make([][sha256.Size]byte, 0, len(cfg.Secrets))
	for i, s := range cfg.Secrets {
		if s == "" {
			problems = append(problems, fmt.Errorf("webhook secret %d is empty", i+1))
			continue
		}
		secrets = append(secrets, sha256.Sum256([]byte(s)))
	}
	if cfg.Store == nil {
		problems = append(problems, errors.New("a delivery store is required"))
	}
	if cfg.Decode == nil {
		problems = append(problems, errors.New("a hook decoder is required"))
	}
	if cfg.MaxBodyBytes < 0 {
		problems = append(problems, fmt.Errorf("max body bytes is negative (%d)", cfg.MaxBodyBytes))
	}
	if cfg.StoreTimeout < 0 {
		problems = append(problems, fmt.Errorf("store timeout is negative (%s)", cfg.StoreTimeout))
	}
	if cfg.MaxBatch < 0 {
		problems = append(problems, fmt.Errorf("max batch is negative (%d)", cfg.MaxBatch))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the GitLab webhook handler: %w", errors.Join(problems...))
	}
	h := &GitLabHandler{
		secrets:      secrets,
		maxBody:      cfg.MaxBodyBytes,
		store:        cfg.Store,
		decode:       cfg.Decode,
		storeTimeout: cfg.StoreTimeout,
		log:          cfg.Logger,
		m:            orNew(cfg.Metrics),

		noteHasCommand: cfg.NoteHasCommand,
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.storeTimeout == 0 {
		h.storeTimeout = DefaultStoreTimeout
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	c, err := newDeliveryCommitter(h.store, cfg.Dispatcher, h.m, cfg.MaxBatch, cfg.MaxInFlight, h.storeTimeout)
	if err != nil {
		return nil, fmt.Errorf("configuring the GitLab webhook handler: %w", err)
	}
	h.intake = c
	return h, nil
}

// GitLabHandler is the handler of POST /webhooks/gitlab (NewGitLabHandler).
type GitLabHandler struct {
	secrets      [][sha256.Size]byte
	maxBody      int64
	store        DeliveryStore
	decode       HookDecoder
	storeTimeout time.Duration
	log          *slog.Logger
	m            *Metrics
	intake       *deliveryCommitter
	// noteHasCommand is GitLabConfig.NoteHasCommand.
	noteHasCommand func(body string) bool
}

// Close stops the group commit after the HTTP server stopped taking
// requests: deliveries arriving later answer 503, and Close waits until
// every queued delivery is committed and answered, or ctx ends (its error
// is returned).
func (h *GitLabHandler) Close(ctx context.Context) error { return h.intake.Close(ctx) }

// ServeHTTP implements http.Handler (NewGitLabHandler documents it).
func (h *GitLabHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	event := r.Header.Get(headerGitLabEvent)
	label := eventLabel(event)
	log := h.log.With(attrEvent, label)
	count := func(outcome string) { h.m.deliveries.WithLabelValues(label, outcome).Inc() }
	defer recoverPanic(w, log, h.m, handlerGitLab, func() { count(OutcomeError) })

	if r.Method != http.MethodPost {
		count(OutcomeMalformed)
		methodNotAllowed(w)
		return
	}
	if limitBody(w, r, h.maxBody) {
		h.tooLarge(w, r, log, count)
		return
	}
	if !h.tokenOK(r.Header.Get(headerGitLabToken)) {
		count(OutcomeUnauthorized)
		log.Warn("webhook refused: invalid token", attrRemoteAddr, r.RemoteAddr)
		writeJSON(w, http.StatusUnauthorized, answer{Error: "invalid webhook token"})
		return
	}
	if event == "" {
		count(OutcomeMalformed)
		log.Warn("webhook refused: no X-Gitlab-Event header", attrRemoteAddr, r.RemoteAddr)
		writeJSON(w, http.StatusBadRequest, answer{Error: "missing X-Gitlab-Event header"})
		return
	}
	body, tooLarge, err := readBody(r)
	if tooLarge {
		h.tooLarge(w, r, log, count)
		return
	}
	if err != nil {
		count(OutcomeMalformed)
		log.Warn("webhook refused: body unreadable", attrError, err)
		writeJSON(w, http.StatusBadRequest, answer{Error: "reading the request body failed"})
		return
	}
	ev, err := h.decode(event, body)
	if err != nil {
		if !errors.Is(err, platform.ErrMalformedHook) {
			// A decoder that breaks its contract is a bug of ours, not the sender's.
			count(OutcomeError)
			log.Error("webhook not decoded: decoder failed", attrError, err)
			writeJSON(w, http.StatusInternalServerError, answer{Error: "decoding the payload failed"})
			return
		}
		count(OutcomeMalformed)
		log.Warn("webhook refused: malformed payload", attrError, err)
		writeJSON(w, http.StatusBadRequest, answer{Error: "malformed payload: " + err.Error()})
		return
	}
	log = log.With(attrProjectID, ev.ProjectID)
	if reason := ignoreReason(ev, h.noteHasCommand); reason != "" {
		count(OutcomeIgnored)
		h.m.ignored.WithLabelValues(reason).Inc()
		log.Debug("webhook ignored", "reason", reason, "kind", ev.Kind)
		writeJSON(w, http.StatusOK, answer{Result: OutcomeIgnored})
		return
	}

	d := store.Delivery{
		DedupeKey: dedupeKey(r.Header.Get(headerIdempotencyKey), event, body),
		Event:     event,
		ProjectID: ev.ProjectID,
		Body:      body,
	}
	ctx, cancel := detached(r, h.storeTimeout)
	defer cancel()
	res, err := h.intake.commit(ctx, log, d)
	id, inserted := res.ID, res.Inserted
	switch {
	case err != nil:
		count(OutcomeError)
		log.Error("webhook not stored", attrError, err)
		writeJSON(w, http.StatusServiceUnavailable, answer{Error: "storing the delivery failed; it was not accepted"})
	case !inserted:
		count(OutcomeDuplicate)
		log.Debug("webhook duplicate", attrOutcome, OutcomeDuplicate)
		writeJSON(w, http.StatusOK, answer{Result: OutcomeDuplicate})
	default:
		count(OutcomeAccepted)
		log.Debug("webhook accepted", attrDeliveryID, id) // the access line is the info one
		writeJSON(w, http.StatusOK, answer{Result: OutcomeAccepted, DeliveryID: id})
	}
}

func (h *GitLabHandler) tooLarge(w http.ResponseWriter, r *http.Request, log *slog.Logger, count func(string)) {
	count(OutcomeTooLarge)
	log.Warn("webhook refused: body too large", "content_length", r.ContentLength, "limit", h.maxBody)
	writeJSON(w, http.StatusRequestEntityTooLarge, answer{Error: fmt.Sprintf("payload larger than %d bytes", h.maxBody)})
}

// tokenOK compares got with every configured secret in constant time. Both
// sides are hashed first so that neither the length of a secret nor which
// secret matched shows in the timing.
func (h *GitLabHandler) tokenOK(got string) bool {
	sum := sha256.Sum256([]byte(got))
	match := 0
	for i := range h.secrets {
		match |= subtle.ConstantTimeCompare(sum[:], h.secrets[i][:])
	}
	return got != "" && match == 1
}

// ignoreReason returns why ev cannot move any change (an Ignored*
// reason), "" when it may. It reads the event only: no database, no GitLab.
// hasCommand nil keeps every note.
func ignoreReason(ev platform.HookEvent, hasCommand func(body string) bool) string {
	switch ev.Kind {
	case platform.HookMergeRequest, platform.HookPipeline:
		return ""
	case platform.HookNote:
		switch {
		case ev.Note == nil || ev.Note.NoteableType != platform.NoteableMergeRequest:
			return IgnoredNotOnMergeRequest
		case ev.Note.System:
			return IgnoredSystemNote
		case ev.Note.Action == platform.NoteActionUpdate:
			return IgnoredEditedNote
		case hasCommand != nil && !hasCommand(ev.Note.Body):
			return IgnoredNoCommand
		}
		return ""
	}
	return IgnoredEventNotUsed
}

// dedupeKey is "idem:"+Idempotency-Key when GitLab sent one (hashed when
// longer than maxIdempotencyKeyLen), else "sha256:"+hex(sha256(event + "\n"
// + body)) (DESIGN §1).
func dedupeKey(idempotencyKey, event string, body []byte) string {
	if idempotencyKey != "" {
		if len(idempotencyKey) <= maxIdempotencyKeyLen {
			return "idem:" + idempotencyKey
		}
		sum := sha256.Sum256([]byte(idempotencyKey))
		return "idem-sha256:" + hex.EncodeToString(sum[:])
	}
	hash := sha256.New()
	hash.Write([]byte(event))
	hash.Write([]byte{'\n'})
	hash.Write(body)
	return "sha256:" + hex.EncodeToString(hash.Sum(nil))
}
